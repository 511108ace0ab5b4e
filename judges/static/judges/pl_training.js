// Live status of a PL training: polls its status every two seconds and stops once the training
// is done, failed or cancelled (then reloads once, so the metrics and buttons are current).
(function () {
  "use strict";
  var box = document.getElementById("training");
  if (!box || box.getAttribute("data-terminal") === "yes") { return; }
  var url = box.getAttribute("data-status-url");
  var curve = document.getElementById("t-curve");
  var curveUrl = curve ? curve.getAttribute("src") : null;

  function poll() {
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { setTimeout(poll, 2000); return; }
        document.getElementById("t-epoch").textContent = data.epoch;
        document.getElementById("t-progress").value = data.epoch;
        document.getElementById("t-status").textContent = data.status;
        document.getElementById("t-error").textContent = data.error;
        document.getElementById("t-queue").textContent = data.queue;
        if (curve) { curve.setAttribute("src", curveUrl + "?epoch=" + data.epoch); }
        if (data.terminal) { window.location.reload(); return; }
        setTimeout(poll, 2000);
      })
      .catch(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
})();
