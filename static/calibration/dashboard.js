// Pass-rate histogram: stacked bars per band, with the floor and retirement lines.
const BAND_COLOURS = {
  too_hard: "#b23b3b",
  in_band: "#2e8b57",
  retire: "#3b6fb2",
  undecided: "#9a9a9a",
  borderline: "#d29a1e",
};

async function drawPassRateHistogram(element) {
  const response = await fetch(element.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    element.textContent = "Could not load the chart (" + response.status + ").";
    return;
  }
  const data = await response.json();
  const centres = data.bin_starts.map((start) => start + data.bin_width / 2);
  const traces = data.band_order
    .filter((band) => data.series[band])
    .map((band) => ({
      type: "bar",
      name: band,
      x: centres,
      y: data.series[band],
      width: data.bin_width * 0.95,
      marker: { color: BAND_COLOURS[band] || "#666" },
      hovertemplate: band + ": %{y} tasks near %{x:.2f}<extra></extra>",
    }));
  const line = (x, label, colour) => ({
    type: "line", x0: x, x1: x, yref: "paper", y0: 0, y1: 1, line: { color: colour, width: 2, dash: "dash" },
  });
  const label = (x, text) => ({ x: x, yref: "paper", y: 1.06, text: text, showarrow: false });
  Plotly.newPlot(
    element,
    traces,
    {
      barmode: "stack",
      xaxis: { title: { text: "pass rate" }, range: [0, 1] },
      yaxis: { title: { text: "tasks" } },
      shapes: [line(data.floor, "floor", "#b23b3b"), line(data.retire_at, "retire", "#3b6fb2")],
      annotations: [label(data.floor, "floor " + data.floor), label(data.retire_at, "retire at " + data.retire_at)],
      margin: { t: 40 },
      legend: { orientation: "h" },
    },
    { displayModeBar: false, responsive: true },
  );
  const summary = document.getElementById("histogram-summary");
  if (summary) {
    summary.textContent = data.tasks + " calibrated tasks, " + data.in_band + " in band, probe cost $" + data.cost_usd.toFixed(4) + ".";
  }
  element.dataset.drawn = "true";
}

document.addEventListener("DOMContentLoaded", () => {
  const element = document.getElementById("pass-rate-histogram");
  if (element) drawPassRateHistogram(element);
});
