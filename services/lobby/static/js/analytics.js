// The analytics page: filters, then every figure of /analytics/figures (or, with an
// experiment to compare with, of /analytics/compare) as rows of bars with their 95%
// interval as a whisker, n beside each, labels from the game (/analytics/labels).
import { get } from "./api.js";
import { clear, h, label, readable, s } from "./dom.js";

const form = document.getElementById("filters");
const figuresBox = document.getElementById("figures");
const summary = document.getElementById("summary");
const errorBox = document.getElementById("error");
const REFRESH_MS = 15000;
let labels = {};
let choices = {};
let games = [];
// The last refresh asked for. Each filter change (and the timer) asks anew, and answers can
// come back out of order: one that a later refresh superseded is not drawn, or the page
// showed the figures of filters no longer chosen (the comparison overwritten by the answer
// to the experiment chosen just before it).
let latest = 0;

// --- labels -------------------------------------------------------------------------------

const named = (space, id) => label(labels, space, id);
const ordinal = (n) => `${n}${["th", "st", "nd", "rd"][(n % 100 - 20) % 10] || ["th", "st", "nd", "rd"][n % 100] || "th"}`;
const kindLabel = (kind) => kind.startsWith("bot:") ? `Bot (${kind.slice(4)})` : readable(kind);
const pct = (x) => `${(100 * x).toFixed(1)}%`;
const signedPct = (x) => `${x >= 0 ? "+" : "−"}${Math.abs(100 * x).toFixed(1)}%`;
const num = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
const signedNum = (x) => `${x >= 0 ? "+" : "−"}${num(Math.abs(x))}`;

// --- the filters --------------------------------------------------------------------------

function select(name, caption, options, value) {
  const field = h("select", { name, "data-testid": `filter-${name}` },
    ...options.map(([v, text]) => h("option", { value: v, selected: v === value, text })));
  return h("label", {}, caption, field);
}

function buildForm(game) {
  const old = Object.fromEntries(new FormData(form));
  const keep = (name) => (old.game === game ? old[name] ?? "" : "");
  const any = (text) => [["", text]];
  const fields = [
    select("game", "Game", games.map((g) => [g.name, g.title]), game),
    select("ruleset", "Ruleset", [
      ...any("Any ruleset"),
      ...choices.rulesets.map((r) => [r, readable(r)]),
      ...choices.ruleset_hashes.map((r) => [r.hash, `${readable(r.ruleset)} (${r.hash.slice(0, 8)})`]),
    ], keep("ruleset")),
    ...Object.entries(choices.options).map(([key, values]) => select(`option:${key}`,
      named("options", key),
      [...any("Any"), ...values.map((v) => [String(v), named("values", String(v))])],
      keep(`option:${key}`))),
    select("players", "Players", [...any("Any number"),
      ...choices.players.map((n) => [String(n), `${n} players`])], keep("players")),
    select("seat_kind", "Seats counted", [...any("Every seat"),
      ...choices.seat_kinds.map((k) => [k, kindLabel(k)])], keep("seat_kind")),
    select("seats", "Games of", [...any("Anyone"), ["humans", "Humans only"],
      ["bots", "Bots only"]], keep("seats")),
    select("imported", "Imported games", [["exclude", "Left out (played elsewhere)"],
      ["include", "Counted too"], ["only", "Only imported"]], keep("imported") || "exclude"),
    h("label", {}, "Finished from", h("input", { type: "date", name: "since", value: keep("since") })),
    h("label", {}, "Finished before", h("input", { type: "date", name: "until", value: keep("until") })),
    select("experiment", "Experiment", [...any("Every game"),
      ...choices.experiments.map((e) => [e.name, `${e.name} (${e.games_recorded} games)`])],
      keep("experiment")),
    select("compare", "Compare with experiment", [...any("Nothing"),
      ...choices.experiments.map((e) => [e.name, e.name])], keep("compare")),
  ];
  clear(form, fields);
}

function query(values, experiment) {
  const params = new URLSearchParams({ game: values.game });
  for (const [key, value] of Object.entries(values)) {
    if (!value || key === "game" || key === "compare" || key === "experiment") continue;
    if (key.startsWith("option:")) params.append("option", `${key.slice(7)}=${value}`);
    else if (key === "since" || key === "until") params.set(key, `${value}T00:00:00+00:00`);
    else params.set(key, value);
  }
  if (experiment) params.set("experiment", experiment);
  return params;
}

// --- drawing ------------------------------------------------------------------------------

const W = 300;

function whisker(y, low, high, scale) {
  const [x1, x2] = [low * scale, high * scale];
  return [
    s("line", { class: "whisker", x1, x2, y1: y, y2: y }),
    s("line", { class: "whisker", x1, x2: x1, y1: y - 4, y2: y + 4 }),
    s("line", { class: "whisker", x1: x2, x2, y1: y - 4, y2: y + 4 }),
  ];
}

// One row: a label, bars with whiskers (one per figure: A, or A and B), a value, a note.
function row(caption, bars, value, max, fair, note) {
  const scale = W / (max || 1);
  const height = 8 + 12 * bars.length;
  const svg = s("svg", { viewBox: `0 0 ${W} ${height}`, preserveAspectRatio: "none",
    role: "img", "aria-label": `${caption}: ${value}` });
  svg.style.height = `${height / 16}rem`;
  bars.forEach((b, i) => {
    const y = 4 + 12 * i;
    svg.append(s("rect", { class: `bar ${i ? "b" : "a"}`, x: 0, y, height: 8,
      width: Math.max(1, b.value * scale) }), ...whisker(y + 4, b.low, b.high, scale));
  });
  if (fair !== undefined) {
    svg.append(s("line", { class: "fair", x1: fair * scale, x2: fair * scale, y1: 0, y2: height }));
  }
  return h("div", { class: "figure", "data-testid": "figure" },
    h("span", { class: "label" }, caption), svg, h("span", { class: "value" }, value),
    note ?? null);
}

function chart(titleText, legend, rows) {
  return h("section", { class: "card chart" }, h("h2", { text: titleText }),
    legend ? h("p", { class: "legend" }, ...legend) : null,
    ...(rows.length ? rows : [h("p", { text: "No finished games match." })]));
}

const rateValue = (r) => `${pct(r.rate)} (n=${r.n})`;
const bar = (r) => ({ value: r.rate, low: r.low, high: r.high });
const barOfMean = (m) => ({ value: m.mean, low: m.low, high: m.high });

function diffNote(d, format) {
  return h("span", { class: `diff${d.significant ? " significant" : ""}` },
    `A − B: ${format(d.diff)} (95% interval ${format(d.low)} to ${format(d.high)})`,
    d.significant ? ": significant" : "");
}

function rateRows(list, labelOf) {
  const max = Math.min(1, Math.max(0.05, ...list.map((r) => r.high)) * 1.05);
  return list.map((r) => row(labelOf(r.value), [bar(r)],
    `${rateValue(r)}${r.significant ? " unbalanced" : ""}`, max, r.expected,
    r.significant ? h("span", { class: "diff significant", text: `Fair share ${pct(r.expected)}: unbalanced (p = ${r.p_value.toPrecision(2)})` }) : null));
}

function compareRows(list, labelOf) {
  const max = Math.min(1, Math.max(0.05, ...list.flatMap((r) => [r.a.high, r.b.high])) * 1.05);
  return list.map((r) => row(labelOf(r.value), [bar(r.a), bar(r.b)],
    `A ${rateValue(r.a)} · B ${rateValue(r.b)}`, max, undefined, diffNote(r, signedPct)));
}

const positionLabel = (p) => `${ordinal(Number(p) + 1)} to play`;
const sideLabel = (v) => named("sides", v);
const playersLabel = (v) => `${v} players`;

function meanRows(means, compared) {
  const names = Object.keys(means).filter((n) => n !== "decisions");
  const pick = (n) => (compared ? [means[n].a, means[n].b] : [means[n]]);
  const max = Math.max(1, ...names.flatMap((n) => pick(n).map((m) => m.high)));
  return names.map((n) => row(named("columns", n), pick(n).map(barOfMean),
    compared ? `A ${num(means[n].a.mean)} · B ${num(means[n].b.mean)} (n=${means[n].a.n}, ${means[n].b.n})`
      : `${num(means[n].mean)} (n=${means[n].n})`,
    max, undefined, compared ? diffNote(means[n], signedNum) : null));
}

function factCharts(facts, compared) {
  const kinds = [...new Set(facts.map((f) => f.kind))];
  return kinds.map((kind) => {
    const mine = facts.filter((f) => f.kind === kind)
      .sort((x, y) => (compared ? y.a.n - x.a.n : y.owners.n - x.owners.n)).slice(0, 20);
    const subject = (f) => named("subjects", f.subject);
    if (compared) {
      const rows = mine.map((f) => row(subject(f), [bar(f.a), bar(f.b)],
        `A ${rateValue(f.a)} · B ${rateValue(f.b)}`, 1, undefined, diffNote(f, signedPct)));
      return chart(`Win rate of the owners: ${named("facts", kind)}`, null, rows);
    }
    const max = Math.min(1, Math.max(0.05, ...mine.map((f) => f.owners.high)) * 1.05);
    const rows = mine.map((f) => row(subject(f), [bar(f.owners)],
      `${rateValue(f.owners)} vs ${pct(f.rest.rate)}`, max, f.rest.rate,
      f.lift.significant ? h("span", { class: "diff significant",
        text: `Lift ${signedPct(f.lift.diff)} (95% interval ${signedPct(f.lift.low)} to ${signedPct(f.lift.high)}): significant` }) : null));
    return chart(`Win rate of the owners: ${named("facts", kind)}`,
      ["Bar: seats that had it; dashed line: the other seats."], rows);
  });
}

function drawFigures(f) {
  const title = games.find((g) => g.name === f.filter.game)?.title ?? readable(f.filter.game);
  document.getElementById("heading").textContent = `Analytics: ${title}`;
  summary.textContent = `${f.games} finished games, ${f.seats} seats; ` +
    `overall win rate ${rateValue(f.overall)}; ` +
    `${num(f.means.decisions?.mean ?? 0)} decisions per game on average.`;
  const fairLegend = ["Dashed line: the fair share (1 in the number of players)."];
  clear(figuresBox,
    chart("Win rate by turn position", fairLegend, rateRows(f.turn_position, positionLabel)),
    chart("Win rate by side", fairLegend, rateRows(f.side, sideLabel)),
    chart("Win rate by player count", fairLegend, rateRows(f.players, playersLabel)),
    chart("Win rate by seat kind", fairLegend, rateRows(f.seat_kind, kindLabel)),
    chart("Mean score", ["Whisker: the 95% interval of the mean."], meanRows(f.means, false)),
    ...factCharts(f.facts, false));
}

function drawComparison(c, a, b) {
  summary.textContent = `A: experiment ${a} (${c.games[0]} games) · B: experiment ${b} ` +
    `(${c.games[1]} games). Each row shows A above B. "Significant": after a ` +
    `Holm-Bonferroni correction over all ${c.correction.tests} differences (5% in all).`;
  const legend = [h("span", { class: "key-a" }), `A: ${a} `, h("span", { class: "key-b" }), `B: ${b}`];
  clear(figuresBox,
    chart("Win rate by turn position", legend, compareRows(c.turn_position, positionLabel)),
    chart("Win rate by side", legend, compareRows(c.side, sideLabel)),
    chart("Win rate by player count", legend, compareRows(c.players, playersLabel)),
    chart("Win rate by seat kind", legend, compareRows(c.seat_kind, kindLabel)),
    chart("Mean score", legend, meanRows(c.means, true)),
    ...factCharts(c.facts, true));
}

// --- loading ------------------------------------------------------------------------------

async function loadGame(game) {
  [choices, labels] = await Promise.all([
    get(`/analytics/filters?game=${encodeURIComponent(game)}`),
    get(`/analytics/labels?game=${encodeURIComponent(game)}`),
  ]);
  buildForm(game);
}

function exportLinks(values) {
  const params = new URLSearchParams({ game: values.game });
  if (values.experiment) params.set("experiment", values.experiment);
  if (values.since) params.set("since", `${values.since}T00:00:00+00:00`);
  if (values.until) params.set("until", `${values.until}T00:00:00+00:00`);
  for (const format of ["parquet", "csv"]) {
    document.getElementById(`export-${format}`).href =
      `/analytics/export?format=${format}&${params}`;
  }
}

async function refresh() {
  const asked = ++latest;
  const values = Object.fromEntries(new FormData(form));
  errorBox.textContent = "";
  exportLinks(values);
  try {
    if (values.compare) {
      const a = values.experiment || "";
      const params = new URLSearchParams({
        a: query(values, a).toString(), b: query(values, values.compare).toString(),
      });
      const compared = await get(`/analytics/compare?${params}`);
      if (asked === latest) drawComparison(compared, a || "every game", values.compare);
    } else {
      const figures = await get(`/analytics/figures?${query(values, values.experiment)}`);
      if (asked === latest) drawFigures(figures);
    }
  } catch (e) {
    if (asked === latest) errorBox.textContent = e.message;
  }
}

async function start() {
  games = await get("/games");
  const wanted = new URLSearchParams(location.search).get("game");
  const game = games.some((g) => g.name === wanted) ? wanted : games[0].name;
  await loadGame(game);
  form.addEventListener("change", async (event) => {
    if (event.target.name === "game") await loadGame(event.target.value);
    await refresh();
  });
  await refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);  // games end live
}

start().catch((e) => { errorBox.textContent = e.message; });
