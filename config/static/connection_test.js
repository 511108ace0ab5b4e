// A connection test or a job made by a worker (core/probes.py): while it is pending, poll its
// state every second, redraw its progress ("step: N of M" and a bar) when the job records some,
// and show its answer in place, after the element's data-ok-prefix or data-fail-prefix, or that
// no worker took it.
(function () {
  "use strict";
  var box = document.getElementById("connection-test");
  if (!box || box.getAttribute("data-state") !== "pending") { return; }
  var url = box.getAttribute("data-status-url");

  function show(data) {
    if (data.state === "done") {
      var prefix = box.getAttribute(data.ok ? "data-ok-prefix" : "data-fail-prefix") || "";
      box.textContent = prefix + data.message;
      box.className = data.ok ? "ok" : "error";
    } else {
      box.textContent = "No worker answered this test in time: is a worker on the default queue running?";
      box.className = "error";
    }
    box.setAttribute("data-state", data.state);
  }

  function progress(data) {
    var p = data.progress;
    box.textContent = p.step + ": " + p.done + " of " + p.total + " ";
    var bar = document.createElement("progress");
    bar.max = p.total > 0 ? p.total : 1;
    bar.value = p.done;
    box.appendChild(bar);
  }

  function poll() {
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || data.state === "pending") {
          if (data && data.progress) { progress(data); }
          setTimeout(poll, 1000);
          return;
        }
        show(data);
      })
      .catch(function () { setTimeout(poll, 1000); });
  }
  setTimeout(poll, 1000);
})();
