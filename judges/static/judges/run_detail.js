// The run page's live progress (moved out of the template for the Content-Security-Policy).
(function () {
  const box = document.getElementById("progress");
  const bar = document.getElementById("progress-bar");
  const stall = document.getElementById("run-stall");
  const scoring = document.getElementById("run-scoring");
  // A run in one of these states changes no more: the page stops asking (and never starts).
  const terminal = ["done", "cancelled", "failed", "budget", "imported"];
  if (terminal.includes(box.dataset.status)) return;
  const fields = ["total", "done", "failed", "parse_errors", "refusals", "pending", "running", "cost_usd", "estimated_to_finish_usd", "possibly_charged_twice", "possibly_charged_twice_usd"];
  async function poll() {
    try {
      const response = await fetch(box.dataset.url, {headers: {"Accept": "application/json"}, credentials: "same-origin"});
      if (!response.ok) return;
      const data = await response.json();
      for (const name of fields) {
        const cell = document.getElementById("p-" + name);
        if (cell) cell.textContent = data[name];
      }
      stall.textContent = data.stall;
      stall.hidden = !data.stall;
      scoring.textContent = data.scoring;
      scoring.hidden = !data.scoring;
      bar.max = data.total;
      bar.value = data.done + data.failed;
      if (terminal.includes(data.status)) {
        window.location.reload();  // once: the reloaded page shows the final state, polls no more
        return;
      }
    } catch (error) {
      /* A failed poll is retried on the next tick. */
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
