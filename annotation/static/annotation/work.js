// Keyboard and small conveniences for the annotator's form. No inline script anywhere: the pages
// are served with a Content-Security-Policy that allows scripts from this site only.
(function () {
  "use strict";
  var form = document.getElementById("judgment-form");
  if (!form) { return; }
  var submitButton = document.getElementById("submit");
  var values = document.getElementById("values");
  var likertInputs = form.querySelectorAll("input[name='likert']");
  var asksAfterPreference = values && values.getAttribute("data-rationale-only") === "no" && likertInputs.length > 0;

  function chosenLikert() {
    for (var i = 0; i < likertInputs.length; i++) {
      if (likertInputs[i].checked) { return parseInt(likertInputs[i].value, 10); }
    }
    return null;
  }

  // Seven values are asked only after a preference: hidden for a tie (4 or 5) or no rating yet.
  function syncValues() {
    if (!asksAfterPreference) { return; }
    var likert = chosenLikert();
    var show = likert !== null && likert !== 4 && likert !== 5;
    values.hidden = !show;
    if (!show) {
      var boxes = values.querySelectorAll("input[type='checkbox']");
      for (var i = 0; i < boxes.length; i++) { boxes[i].checked = false; }
    }
  }

  for (var i = 0; i < likertInputs.length; i++) {
    likertInputs[i].addEventListener("change", syncValues);
  }
  syncValues();

  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    // Keys in the skip form belong to it (its reason list, its button), not to the rating.
    if (target.closest && target.closest("#skip-form")) { return true; }
    return tag === "textarea" || tag === "select" || (tag === "input" && (target.type === "text" || target.type === "search"));
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) { return; }
    if (event.key >= "1" && event.key <= "8" && likertInputs.length) {
      var input = document.getElementById("likert-" + event.key);
      if (input) {
        input.checked = true;
        input.focus();
        syncValues();
        event.preventDefault();
      }
    } else if (event.key === "Enter" && (chosenLikert() !== null || likertInputs.length === 0)) {
      event.preventDefault();
      if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
    }
  });

  // One submission per page: the server is idempotent anyway, this only spares a second request.
  var sent = false;
  form.addEventListener("submit", function (event) {
    if (sent) { event.preventDefault(); return; }
    sent = true;
    if (submitButton) { submitButton.disabled = true; submitButton.textContent = "Saving…"; }
  });
  // Coming back with the back button shows a fresh page (no-store); re-enable just in case.
  window.addEventListener("pageshow", function () {
    sent = false;
    if (submitButton) { submitButton.disabled = false; submitButton.textContent = "Submit and continue"; }
  });
})();
