(function () {
  var root = document.documentElement, errors = [];
  function note(msg) {
    errors.push(String(msg));
    root.setAttribute('data-js-errors', JSON.stringify(errors));
  }
  window.addEventListener('error', function (e) { note(e.message || 'error'); });
  window.addEventListener('unhandledrejection', function (e) { note('unhandled rejection: ' + e.reason); });
  var original = console.error;
  console.error = function () {
    note(Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
  root.setAttribute('data-js-errors', '[]');
})();
