document.querySelectorAll('table.comparison th').forEach(function (th, column) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var down = th.getAttribute('data-order') !== 'asc';
    th.setAttribute('data-order', down ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[column].getAttribute('data-sort'), y = b.cells[column].getAttribute('data-sort');
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return down ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
