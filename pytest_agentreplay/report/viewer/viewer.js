(function () {
  var root = document.documentElement;
  function entries(scope) { return Array.prototype.slice.call(scope.querySelectorAll('li.entry')); }
  Array.prototype.forEach.call(document.querySelectorAll('.toolbar'), function (bar) {
    var scope = bar.parentNode;
    bar.addEventListener('click', function (ev) {
      var button = ev.target.closest('button');
      if (!button) { return; }
      var action = button.getAttribute('data-action');
      if (action === 'filter') {
        var wanted = button.getAttribute('data-type');
        Array.prototype.forEach.call(bar.querySelectorAll('button[data-action=filter]'), function (b) {
          b.classList.toggle('active', b === button);
        });
        entries(scope).forEach(function (li) {
          li.classList.toggle('hidden', wanted !== '*' && li.getAttribute('data-type') !== wanted);
        });
      } else if (action === 'expand' || action === 'collapse') {
        Array.prototype.forEach.call(scope.querySelectorAll('li.entry details'), function (d) {
          d.open = action === 'expand';
        });
      } else if (action === 'drifted') {
        entries(scope).forEach(function (li) {
          li.classList.toggle('hidden', !li.classList.contains('drifted'));
        });
      }
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll('svg.sequence [data-target]'), function (node) {
    node.addEventListener('click', function () {
      var target = document.getElementById(node.getAttribute('data-target'));
      if (target) {
        target.scrollIntoView({block: 'center'});
        if (history.replaceState) { history.replaceState(null, '', '#' + target.id); }
      }
    });
  });
  root.setAttribute('data-ready', '1');
})();
