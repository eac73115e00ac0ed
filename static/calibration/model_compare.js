// Two probe models task by task: a pass-rate scatter coloured by band agreement, and the agreement table.
// Bands read as the pages spell them (the band_label template filter): "too hard", not "too_hard".
const bandLabel = (band) => String(band ?? "").replace("_", " ");
async function drawModelCompare(element) {
  const response = await fetch(element.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    element.textContent = "Could not load the comparison (" + response.status + ").";
    return;
  }
  const data = await response.json();
  const points = data.points;
  const agree = points.first_band.map((band, index) => band === points.second_band[index]);
  const trace = (same, name, colour) => {
    const keep = agree.map((value) => value === same);
    const pick = (values) => values.filter((_, index) => keep[index]);
    return {
      type: "scatter",
      mode: "markers",
      name: name,
      x: pick(points.first),
      y: pick(points.second),
      text: pick(points.key).map((key, index) => key + " (" + bandLabel(pick(points.first_band)[index]) + " / " + bandLabel(pick(points.second_band)[index]) + ")"),
      hovertemplate: "%{text}<br>" + data.first + " %{x:.3f}<br>" + data.second + " %{y:.3f}<extra></extra>",
      marker: { color: colour, size: 6, opacity: 0.7 },
    };
  };
  const line = (axis, value, colour) => ({
    type: "line",
    xref: axis === "x" ? "x" : "paper", yref: axis === "y" ? "y" : "paper",
    x0: axis === "x" ? value : 0, x1: axis === "x" ? value : 1,
    y0: axis === "y" ? value : 0, y1: axis === "y" ? value : 1,
    line: { color: colour, width: 1, dash: "dash" },
  });
  Plotly.newPlot(
    element,
    [trace(true, "same band", "#2e8b57"), trace(false, "different band", "#b23b3b")],
    {
      xaxis: { title: { text: data.first + " pass rate" }, range: [0, 1] },
      yaxis: { title: { text: data.second + " pass rate" }, range: [0, 1] },
      shapes: [
        { type: "line", x0: 0, y0: 0, x1: 1, y1: 1, line: { color: "#999", width: 1 } },
        line("x", data.floor, "#b23b3b"), line("x", data.retire_at, "#3b6fb2"),
        line("y", data.floor, "#b23b3b"), line("y", data.retire_at, "#3b6fb2"),
      ],
      margin: { t: 20 },
      legend: { orientation: "h" },
    },
    { displayModeBar: false, responsive: true },
  );
  const fmt = (value, digits) => (value === null || value === undefined ? "n/a" : value.toFixed(digits));
  const agreement = data.band_agreement;
  document.getElementById("compare-summary").textContent =
    data.tasks + " tasks probed by both" + (points.key.length < data.tasks ? " (" + points.key.length + " drawn)" : "") +
    "; Spearman rank correlation " + fmt(data.spearman, 3) +
    "; same band on " + fmt(agreement.agreement === null ? null : 100 * agreement.agreement, 1) + "% of the " +
    agreement.tasks + " tasks decided under both (Cohen's kappa " + fmt(agreement.cohen_kappa, 2) + ").";
  const body = document.querySelector("#band-agreement tbody");
  body.replaceChildren(
    ...agreement.counts.map((row) => {
      const tr = document.createElement("tr");
      for (const value of [bandLabel(row.first), bandLabel(row.second), row.count]) {
        const td = document.createElement("td");
        td.textContent = value;
        tr.appendChild(td);
      }
      return tr;
    }),
  );
  element.dataset.drawn = "true";
}

document.addEventListener("DOMContentLoaded", () => {
  const element = document.getElementById("model-compare-scatter");
  if (element) drawModelCompare(element);
});
