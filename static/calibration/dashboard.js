// plotly.js (1.1 MB) is fetched only when a chart is about to be drawn, once per page: a visit that draws
// no chart (no environment chosen) never loads it, and the page is usable before it arrives.
const PLOTLY_SRC = document.currentScript && document.currentScript.dataset.plotly;
let plotlyLoading = null;
function plotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoading) {
    plotlyLoading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = PLOTLY_SRC;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error("plotly.js did not load"));
      document.head.appendChild(script);
    });
  }
  return plotlyLoading;
}

// Legends sit above the plot, where the margin grows to fit them: below it they covered the x axis's title and ticks.
const LEGEND_ABOVE = { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" };
const LINE_INK = "#1d2330";
// Bands read as the pages spell them (the band_label template filter): "too hard", not "too_hard".
const bandLabel = (band) => String(band ?? "").replace("_", " ");

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
      name: bandLabel(band),
      x: centres,
      y: data.series[band],
      width: data.bin_width * 0.95,
      marker: { color: BAND_COLOURS[band] || "#666" },
      hovertemplate: bandLabel(band) + ": %{y} tasks near %{x:.2f}<extra></extra>",
    }));
  const line = (x, label, colour) => ({
    type: "line", x0: x, x1: x, yref: "paper", y0: 0, y1: 1, layer: "above", line: { color: colour, width: 2, dash: "dash" },
  });
  const label = (x, text) => ({ x: x, yref: "paper", y: 1, yanchor: "top", text: text, showarrow: false, bgcolor: "rgba(255,255,255,0.85)" });
  (await plotly()).newPlot(
    element,
    traces,
    {
      barmode: "stack",
      xaxis: { title: { text: "pass rate" }, range: [0, 1] },
      yaxis: { title: { text: "tasks" }, rangemode: "nonnegative" },
      // Ink, above the bars: in a band colour the floor line vanished into the too_hard bar it crosses.
      shapes: [line(data.floor, "floor", LINE_INK), line(data.retire_at, "retire", LINE_INK)],
      annotations: [label(data.floor, "floor " + data.floor), label(data.retire_at, "retire at " + data.retire_at)],
      margin: { t: 30, r: 10 },
      legend: LEGEND_ABOVE,
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

// The other charts: each fetches one endpoint that aggregates in the database.
const LAYOUT = { margin: { t: 20, r: 10 }, legend: LEGEND_ABOVE };
const CONFIG = { displayModeBar: false, responsive: true };

async function fetchJson(element) {
  const response = await fetch(element.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    element.textContent = "Could not load the chart (" + response.status + ").";
    return null;
  }
  return response.json();
}

function dollars(value) {
  return value === null || value === undefined ? "—" : "$" + value.toFixed(2);
}

async function drawBandsOverTime(element) {
  const data = await fetchJson(element);
  if (!data) return;
  const dashes = ["solid", "dot", "dash", "longdash", "dashdot"];
  const environments = [...new Set(data.series.map((s) => s.environment))];
  const traces = data.series.map((s) => ({
    type: "scatter", mode: "lines+markers", name: s.environment + " · " + bandLabel(s.band), x: data.days, y: s.counts,
    line: { shape: "hv", color: BAND_COLOURS[s.band] || "#666", dash: dashes[environments.indexOf(s.environment) % dashes.length] },
  }));
  // Whole days, from the first to the last with half a day either side, so the last point is inside the axis.
  const days = data.days.map((day) => new Date(day + "T00:00:00Z").getTime());
  const halfDay = 12 * 3600 * 1000;
  const xaxis = days.length
    ? { type: "date", range: [new Date(days[0] - halfDay).toISOString(), new Date(days[days.length - 1] + halfDay).toISOString()], tickformat: "%b %d",
        ...(days.length <= 14 ? { dtick: 24 * 3600 * 1000 } : {}) }
    : {};
  (await plotly()).newPlot(element, traces, { ...LAYOUT, xaxis: xaxis, yaxis: { title: { text: "tasks" }, rangemode: "tozero" } }, CONFIG);
  element.dataset.drawn = "true";
}

async function drawCost(element) {
  const data = await fetchJson(element);
  if (!data) return;
  const names = data.environments.map((row) => row.environment);
  (await plotly()).newPlot(element, [
    { type: "bar", name: "per task", x: names, y: data.environments.map((row) => row.cost_per_task_usd), marker: { color: "#9a9a9a" } },
    { type: "bar", name: "per in-band task", x: names, y: data.environments.map((row) => row.cost_per_in_band_task_usd), marker: { color: BAND_COLOURS.in_band } },
  ], { ...LAYOUT, barmode: "group", xaxis: { type: "category" }, yaxis: { title: { text: "dollars (authoring + probing)" }, rangemode: "nonnegative" } }, CONFIG);
  element.dataset.drawn = "true";
  const summary = document.getElementById("cost-summary");
  if (summary) {
    const share = data.spent_usd ? (100 * data.wasted_usd / data.spent_usd).toFixed(1) : "0";
    summary.textContent = "Spent " + dollars(data.spent_usd) + ", of which " + dollars(data.wasted_usd) + " (" + share + "%) on tasks too hard or too easy.";
  }
  const waste = document.getElementById("spend-by-band");
  if (waste) {
    const environments = [...new Set(data.bands.map((row) => row.environment))];
    const traces = data.band_order
      .filter((band) => data.bands.some((row) => row.band === band))
      .map((band) => ({
        type: "bar", name: bandLabel(band), x: environments, marker: { color: BAND_COLOURS[band] || "#666" },
        y: environments.map((env) => {
          const row = data.bands.find((r) => r.environment === env && r.band === band);
          return row ? row.probing_usd + row.authoring_usd : 0;
        }),
      }));
    (await plotly()).newPlot(waste, traces, { ...LAYOUT, barmode: "stack", xaxis: { type: "category" }, yaxis: { title: { text: "dollars" }, rangemode: "nonnegative" } }, CONFIG);
    waste.dataset.drawn = "true";
  }
}

async function drawLatency(element) {
  const data = await fetchJson(element);
  if (!data) return;
  const line = (name, colour) => ({ type: "scatter", mode: "lines+markers", name: name + " ms", x: data.hours, y: data[name], line: { color: colour } });
  (await plotly()).newPlot(element, [
    line("p50", "#3b6fb2"), line("p90", "#d29a1e"), line("p99", "#b23b3b"),
    { type: "bar", name: "error rate", x: data.hours, y: data.error_rate, yaxis: "y2", marker: { color: "rgba(178,59,59,0.25)" } },
  ], {
    ...LAYOUT,
    // The whole window in whole hours (a single point no longer zooms the axis to milliseconds), and
    // room on the right for the error-rate axis.
    margin: { t: 20, r: 70 },
    xaxis: { type: "date", range: [data.since, data.until], tickformat: "%H:%M<br>%b %d" },
    yaxis: { title: { text: "verify ms" }, rangemode: "tozero" },
    yaxis2: { title: { text: "error rate" }, overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%" },
  }, CONFIG);
  element.dataset.drawn = "true";
  const summary = document.getElementById("latency-summary");
  if (summary) {
    const rate = data.error_rate_overall === null ? "—" : (100 * data.error_rate_overall).toFixed(2) + "%";
    summary.textContent = data.verdicts + " verdicts, " + data.errors + " errors, " + data.timeouts + " timeouts, " + data.tampered + " tampered: error rate " + rate + ".";
  }
}

async function drawCampaigns(element) {
  const data = await fetchJson(element);
  if (!data) return;
  const rows = data.campaigns.slice().reverse();
  (await plotly()).newPlot(element, [
    { type: "bar", orientation: "h", name: "done", y: rows.map((c) => c.label), x: rows.map((c) => c.items_done), marker: { color: BAND_COLOURS.in_band } },
    { type: "bar", orientation: "h", name: "to do", y: rows.map((c) => c.label), x: rows.map((c) => c.items_to_do), marker: { color: "#d9dde5" } },
    { type: "bar", orientation: "h", name: "cancelled", y: rows.map((c) => c.label), x: rows.map((c) => c.items_dropped), marker: { color: "#f3e3e3", pattern: { shape: "/" } } },
  ], { ...LAYOUT, barmode: "stack", margin: { t: 20, r: 10, l: Math.min(220, element.clientWidth / 3) }, xaxis: { title: { text: "task versions" }, rangemode: "nonnegative" }, yaxis: { type: "category", automargin: true } }, CONFIG);
  element.dataset.drawn = "true";
}

async function drawOperatingCharacteristic(element) {
  const data = await fetchJson(element);
  if (!data) return;
  const x = data.pass_rates.map((rate) => 100 * rate);
  const label = (band, name) => ({ type: "scatter", mode: "lines", name, x, y: data.labels[band], line: { color: BAND_COLOURS[band] || "#666" } });
  const zone = ([low, high]) => ({ type: "rect", xref: "x", yref: "paper", x0: 100 * low, x1: 100 * high, y0: 0, y1: 1, fillcolor: "#eef0f4", line: { width: 0 }, layer: "below" });
  (await plotly()).newPlot(element, [
    label("too_hard", "P(too hard)"), label("in_band", "P(in band)"), label("retire", "P(retire)"), label("borderline", data.policy.undecided_label),
    { type: "scatter", mode: "lines", name: "P(wrong band)", x, y: data.wrong, line: { color: "#b00020", dash: "dot" } },
    { type: "scatter", mode: "lines", name: "mean rollouts", x, y: data.expected_rollouts, yaxis: "y2", line: { color: "#555", dash: "dash" } },
    // The table learned from the environment's own probes, beside the rule (docs/prediction.md).
    ...(data.learned ? [
      { type: "scatter", mode: "lines", name: "P(wrong), learned table", x, y: data.learned.wrong, line: { color: "#e07000", dash: "dot" } },
      { type: "scatter", mode: "lines", name: "mean rollouts, learned table", x, y: data.learned.expected_rollouts, yaxis: "y2", line: { color: "#e07000", dash: "dash" } },
    ] : []),
    // Re-profiling a checkpoint: bands the item-response model is sure of are kept with no rollouts.
    ...(data.prior ? [
      { type: "scatter", mode: "lines", name: "P(wrong), with the checkpoint prior", x, y: data.prior.wrong, line: { color: "#1a7f37", dash: "dot" } },
      { type: "scatter", mode: "lines", name: "mean rollouts, with the checkpoint prior", x, y: data.prior.expected_rollouts, yaxis: "y2", line: { color: "#1a7f37", dash: "dash" } },
    ] : []),
  ], {
    ...LAYOUT,
    margin: { t: 20, r: 60 },
    shapes: [zone(data.zones.floor), zone(data.zones.retire)],
    xaxis: { title: { text: "true pass rate (%)" }, type: "log", range: [-1, 2] },
    yaxis: { title: { text: "probability" }, range: [0, 1] },
    yaxis2: { title: { text: "rollouts" }, overlaying: "y", side: "right", rangemode: "tozero" },
    legend: { orientation: "h", y: -0.3 },
  }, CONFIG);
  element.dataset.drawn = "true";
  const outside = (_, i) => {
    const rate = data.pass_rates[i];
    return !(rate >= data.zones.floor[0] && rate < data.zones.floor[1]) && !(rate >= data.zones.retire[0] && rate < data.zones.retire[1]);
  };
  const worst = Math.max(...data.wrong.filter(outside));
  const undecided = Math.max(...data.labels.borderline.filter(outside));
  const summary = document.getElementById("oc-summary");
  if (summary) summary.textContent = `${data.policy.description[0].toUpperCase()}${data.policy.description.slice(1)}: ` +
    `outside the zones a band is wrong at most ${(100 * worst).toFixed(1)}% of the time, and a task is left ` +
    `${data.policy.kind === "fixed" ? "undecided" : "borderline"} (no band, not a wrong one) at most ${(100 * undecided).toFixed(1)}% of the time.` +
    (data.learned ? ` This environment probes with a table learned from its own tasks under ${data.learned.probe_model} (orange): ` +
      "it spends fewer rollouts where its population allows and is held to 1% wrong on average, not per task." : "") +
    (data.learning ? ` Under ${data.learning.probe_model} this environment has enough tasks to learn a table from, ` +
      `but keeps the rule: ${data.learning.rule_kept_because}.` : "") +
    (data.strata ? strataSentence(data.strata) : "") +
    (data.prior ? ` ${data.prior.probe_model} was re-profiled from ${data.prior.checkpoints.join(", ")} (green): a band the ` +
      `item-response model gives at least ${100 * data.prior.level}% costs no rollouts (drawn over its tasks' prediction ` +
      `uncertainties, ${priorSpread(data.prior)} logits); the promise is that model's.` : "");
}

function strataSentence(strata) {
  const declared = strata.source === "declared difficulty";
  const which = declared ? "Enough of its tasks declare a difficulty" : "Enough of its tasks have results under other probe models";
  if (!strata.tables) return ` ${which} to learn tables by it under ${strata.probe_model}, but they keep the rule: ${strata.outcome}.`;
  const split = declared ? ` (split at ${strata.cuts.map((cut) => `${Number(cut.toPrecision(3))}`).join(", ")})` : "";
  const who = declared ? "Tasks that declare a difficulty follow" :
    "Tasks with results under other probe models follow";
  const what = declared ? "of it" : "of the difficulty those results give them";
  return ` ${who} one of ${strata.tables} tables learned per stratum ${what} under ${strata.probe_model}${split}, ` +
    "held to the same 1% together.";
}

function priorSpread(prior) {
  const [low, high] = prior.logit_sd_range || [prior.logit_sd, prior.logit_sd];
  return low === high ? `${low}` : `${low} to ${high}, median ${prior.logit_sd}`;
}

document.addEventListener("DOMContentLoaded", () => {
  const charts = {
    "operating-characteristic": drawOperatingCharacteristic, "bands-over-time": drawBandsOverTime, "cost-per-task": drawCost, "verifier-latency": drawLatency, "campaign-progress": drawCampaigns };
  for (const [id, draw] of Object.entries(charts)) {
    const element = document.getElementById(id);
    if (element) draw(element);
  }
});
