// Navegador drawn from a view (shared/games/navegador/view_model.py): the rondel with every
// stone, the sea map as a graph of regions and borders, the market, the building tracks, the
// privilege gallery, the Navegador card and every player's sheet. Board parts carry
// data-target keys (rondel:N, region:ID, good:ID, building:ID, column:ID, card, shipyard);
// the shell highlights those the seat's legal commands name, and a click on one plays it.

import { h, s, clear, plural, title, words } from "../dom.js";
import * as generic from "./generic.js";

const COLORS = ["#c0392b", "#2e6fd1", "#d4a400", "#2d8a4e", "#7d3c98"];
const PHASES = ["", "I", "II", "III"];
const GOODS = { sugar: "#f5f0e1", gold: "#f1c40f", spice: "#c0602b" };
const COLUMNS = ["colony", "factory", "explorer", "shipyard", "church"];
const MARKET_ROWS = 10;
// The map's regions sit on a 3-column grid (column, row): the standard board's places below; a
// region of another ruleset goes on the grid's free cells. The borders, the sailing range and
// the rondel's free steps are the ruleset's, read from the view's board part.
const GRID = {
  portugal: [0, 0], guine: [0, 1], bahia: [0, 2], angola: [1, 2], rio_de_janeiro: [0, 3],
  cabo_da_boa_esperanca: [1, 3], mocambique: [2, 4], goa: [2, 5], ceilao: [1, 5], malaca: [0, 5],
  timor: [0, 6], macau: [1, 6], nagasaki: [2, 6],
};
const CELL_W = 152, CELL_H = 104, NODE_W = 140, NODE_H = 92;

const color = (seat) => COLORS[seat % COLORS.length];
const who = (view, seat) => view.players?.[seat]?.name ?? `Seat ${seat + 1}`;
const regionName = (view, id) => view.regions?.find((r) => r.id === id)?.name ?? title(id);
const field = (view, index) => `${title(view.rondel[index])} (field ${index + 1})`;

// The ships the stone's move to `to` costs: each step beyond the board's free ones (the first
// placement is free).
export function rondelCost(view, from, to) {
  if (from === null || from === undefined) return 0;
  const fields = view.rondel.length;
  const steps = (to - from + fields) % fields || fields;
  return Math.max(0, steps - view.board.free_steps);
}

export function draw(board, view, { seat } = {}) {
  const map = s("svg", { viewBox: `0 0 ${3 * CELL_W + 8} ${7 * CELL_H + 8}`, role: "img",
    "aria-label": "The sea map", "data-part": "map", style: "flex: 1 1 330px; max-width: 560px" });
  const rondel = s("svg", { viewBox: "0 0 340 380", role: "img", "aria-label": "The rondel and the Navegador card",
    "data-part": "rondel", style: "flex: 1 1 300px; max-width: 460px" });
  const market = s("svg", { viewBox: "0 0 340 595", role: "img", "aria-label": "The market, the buildings and the privileges",
    "data-part": "market", style: "flex: 1 1 300px; max-width: 460px" });
  drawMap(map, view);
  drawRondel(rondel, view, seat);
  drawMarket(market, view);
  drawBuildings(market, view, 325);
  drawGallery(market, view, 505);
  clear(board,
    h("h2", { class: "board-title", "data-testid": "phase" }, heading(view)),
    h("div", { class: "board-parts" }, rondel, map, market),
    h("p", { class: "waiting" }, waiting(view)));
}

function heading(view) {
  const phase = `Phase ${PHASES[view.phase] ?? view.phase}`;
  const next = view.next_phase ? ` (phase ${PHASES[view.next_phase] ?? view.next_phase} next turn)` : "";
  const end = view.end.triggered ? ` · final turns left: ${view.end.final_turns_left ?? 0}` : "";
  const stage = view.stage === "over" ? "game over" : `${who(view, view.current)}: ${words(view.stage)}`;
  return `Turn ${view.turn} · ${phase}${next} · ${stage}${end}`;
}

function waiting(view) {
  if (view.stage === "over") return "The game is over.";
  const pending = (view.pending ?? []).map((p) => `${who(view, p.seat)} (${words(p.kind)})`);
  const owed = view.owed_ships ? ` · ${plural(view.owed_ships, "ship")} still to pay for the move` : "";
  return pending.length ? `Waiting for ${pending.join(", ")}${owed}` : "";
}

// --- the map -------------------------------------------------------------------------------

function drawMap(svg, view) {
  const used = new Set(view.regions.map((r) => String(GRID[r.id])));
  const free = [];
  for (let row = 0; row < 7; row++) for (let col = 0; col < 3; col++) if (!used.has(String([col, row]))) free.push([col, row]);
  const at = {};
  view.regions.forEach((r) => { at[r.id] = GRID[r.id] ?? free.shift() ?? [0, 0]; });
  const centre = (id) => [4 + at[id][0] * CELL_W + CELL_W / 2, 4 + at[id][1] * CELL_H + CELL_H / 2];
  const lx = 4 + 2 * CELL_W + 8;
  svg.append(s("text", { x: lx, y: 30, "font-size": 16, "font-weight": 700, fill: "#13293d" }, "The seas"));
  const removed = Object.entries(view.removed_tokens).map(([g, n]) => `${n} ${g}`);
  const range = view.board.sailing_range[view.phase - 1] ?? view.board.sailing_range.at(-1);
  const legend = [`Ships sail up to ${plural(range, "border")}`, `(phase ${PHASES[view.phase] ?? view.phase}).`, "",
    "Dark disc: the explorer", "disc of an unexplored", "region; a coloured one:", "who explored it.", "",
    "Under a region: its", "colony prices, or its", "face-down tokens.", "", "Out of the game:", removed.join(", ")];
  legend.forEach((line, i) => svg.append(s("text", { x: lx, y: 52 + i * 15, "font-size": 12, fill: "#444" }, line)));
  for (const [a, b] of view.board.borders) {
    if (!at[a] || !at[b]) continue;
    const [x1, y1] = centre(a), [x2, y2] = centre(b);
    svg.append(s("line", { x1, y1, x2, y2, stroke: "#2f6d8f", "stroke-width": 3, "stroke-dasharray": "8 4",
      "data-border": `${a}|${b}` }));
  }
  view.regions.forEach((region, r) => {
    const [cx, cy] = centre(region.id);
    const x = cx - NODE_W / 2, y = cy - NODE_H / 2;
    const g = s("g", { "data-target": `region:${region.id}`, "data-region": region.id, "aria-label": region.name });
    g.append(s("rect", { x, y, width: NODE_W, height: NODE_H, rx: 12, stroke: "#2f6d8f", "stroke-width": 1.5,
      fill: region.explored ? "#cfe6f2" : "#9fbfd1" }));
    const long = region.name.length > 15; // squeezed into the node, short of the explorer disc
    g.append(s("text", { x: x + 8, y: y + 17, "font-size": long ? 11 : 13, "font-weight": 700,
      textLength: long ? NODE_W - 36 : null, lengthAdjust: long ? "spacingAndGlyphs" : null }, region.name));
    const good = region.good ? `${title(region.good)}` : "Home port";
    g.append(s("text", { x: x + 8, y: y + 32, "font-size": 11, fill: "#333" },
      good + (region.double_loss && !region.explored ? " · double loss" : "")));
    if (!region.explored) {
      g.append(s("circle", { cx: x + NODE_W - 16, cy: y + 16, r: 10, fill: "#3b2f2f", stroke: "#fff", "stroke-width": 1.5 }));
      g.append(s("text", { x: x + 8, y: y + 48, "font-size": 11, fill: "#222" }, `${region.face_down} tokens face down`));
    } else if (region.tokens) {
      const text = region.tokens.length ? region.tokens.map((p) => `$${p}`).join(" ") : region.good ? "no colonies left" : "";
      g.append(s("text", { x: x + 8, y: y + 48, "font-size": 11, fill: "#5d4037", "data-tokens": region.tokens.join(",") }, text));
      if (region.explorer !== null) {
        g.append(s("circle", { cx: x + NODE_W - 16, cy: y + 16, r: 7, fill: color(region.explorer), stroke: "#222" }));
      }
    }
    let sx = x + 8;
    view.players.forEach((p) => {
      const n = p.ships[r];
      if (!n) return;
      g.append(s("path", { d: `M${sx} ${y + 64} h26 l-5 9 h-16 z`, fill: color(p.seat), stroke: "#222" }));
      g.append(s("text", { x: sx + 13, y: y + 86, "font-size": 11, "text-anchor": "middle", "font-weight": 700,
        "data-ships": `${p.seat}:${region.id}` }, `${n}`));
      sx += 32;
    });
    svg.append(g);
  });
}

// --- the rondel and the card ---------------------------------------------------------------

function drawRondel(svg, view, seat) {
  const cx = 170, cy = 170, radius = 118, n = view.rondel.length;
  const me = seat === null || seat === undefined ? null : view.players[seat];
  const reachable = new Set((view.legal_commands ?? []).filter((c) => c.type === "rondel").map((c) => c.field));
  svg.append(s("circle", { cx, cy, r: radius + 40, fill: "#f6efe0", stroke: "#a89f91" }));
  svg.append(s("text", { x: cx, y: cy - 4, "font-size": 14, "font-weight": 700, "text-anchor": "middle" }, "Rondel"));
  svg.append(s("text", { x: cx, y: cy + 12, "font-size": 10, "text-anchor": "middle", fill: "#555" }, `${plural(view.board.free_steps, "step")} free,`));
  svg.append(s("text", { x: cx, y: cy + 24, "font-size": 10, "text-anchor": "middle", fill: "#555" }, "then a ship each"));
  view.rondel.forEach((action, i) => {
    const angle = (-90 + (360 / n) * i) * (Math.PI / 180);
    const fx = cx + radius * Math.cos(angle), fy = cy + radius * Math.sin(angle);
    const g = s("g", { "data-target": `rondel:${i}`, "data-field": i, "aria-label": field(view, i) });
    g.append(s("rect", { x: fx - 40, y: fy - 26, width: 80, height: 52, rx: 10,
      fill: reachable.has(i) ? "#fff3d6" : "#fffdf7", stroke: "#a89f91", "stroke-width": 1.5 }));
    g.append(s("text", { x: fx, y: fy - 10, "font-size": 12, "font-weight": 700, "text-anchor": "middle" }, title(action)));
    if (reachable.has(i)) {
      const cost = rondelCost(view, me?.stone, i);
      g.append(s("text", { x: fx, y: fy + 3, "font-size": 10, "text-anchor": "middle", fill: "#a4161a", "data-cost": cost },
        cost ? plural(cost, "ship") : "free"));
    }
    let dx = fx - 30;
    view.players.forEach((p) => {
      if (p.stone !== i) return;
      g.append(s("circle", { cx: dx, cy: fy + 15, r: 7, fill: color(p.seat), stroke: "#222", "data-stone": p.seat }));
      dx += 15;
    });
    if (view.card.marker === i) {
      g.append(s("path", { d: `M${fx + 18} ${fy + 10} h20 l-4 8 h-12 z`, fill: "#e67e22", stroke: "#222" }));
    }
    svg.append(g);
  });
  const card = s("g", { "data-target": "card", "aria-label": "The Navegador card" });
  card.append(s("rect", { x: 10, y: 334, width: 320, height: 40, rx: 8, fill: "#fde7cf", stroke: "#e67e22", "stroke-width": 1.5 }));
  card.append(s("circle", { cx: 28, cy: 354, r: 8, fill: color(view.card.holder), stroke: "#222" }));
  card.append(s("text", { x: 42, y: 351, "font-size": 12, "font-weight": 700, "data-holder": view.card.holder },
    `Navegador card: ${who(view, view.card.holder)}`));
  const marker = view.card.marker === null ? "no orange ship yet" : `orange ship on ${title(view.rondel[view.card.marker])}`;
  card.append(s("text", { x: 42, y: 366, "font-size": 10, fill: "#444" },
    `${marker} · ${view.card.usable ? "usable" : "not usable"} now`));
  svg.append(card);
}

// --- market, buildings, gallery ------------------------------------------------------------

function drawMarket(svg, view) {
  const x = 10, y = 40, rowH = 22, colW = 62;
  svg.append(s("text", { x, y: 22, "font-size": 14, "font-weight": 700 }, "Market (row 1 is the top)"));
  const legend = x + 30 + 3 * colW;
  svg.append(s("text", { x: legend, y: y + 30, "font-size": 11, fill: "#555" }, "Marker: the"));
  svg.append(s("text", { x: legend, y: y + 44, "font-size": 11, fill: "#555" }, "price of a sale;"));
  svg.append(s("text", { x: legend, y: y + 58, "font-size": 11, fill: "#555" }, "selling moves it"));
  svg.append(s("text", { x: legend, y: y + 72, "font-size": 11, fill: "#555" }, "down, processing up."));
  svg.append(s("text", { x: legend, y: y + 34 + MARKET_ROWS * rowH, "font-size": 11, fill: "#2d6a4f" }, "◀ factory income"));
  for (let row = 1; row <= MARKET_ROWS; row++) {
    const ry = y + 16 + (row - 1) * rowH;
    svg.append(s("text", { x, y: ry + 15, "font-size": 10, fill: "#777" }, row));
  }
  view.market.forEach((m, i) => {
    const gx = x + 22 + i * colW;
    const g = s("g", { "data-target": `good:${m.good}`, "aria-label": `${title(m.good)}: row ${m.row}, $${m.price}` });
    g.append(s("rect", { x: gx, y: y + 14, width: colW - 6, height: MARKET_ROWS * rowH + 4, rx: 6,
      fill: "#fffdf7", stroke: "#b08d57" }));
    g.append(s("text", { x: gx + (colW - 6) / 2, y: y + 8, "font-size": 12, "font-weight": 700, "text-anchor": "middle" }, title(m.good)));
    const my = y + 16 + (m.row - 1) * rowH;
    g.append(s("rect", { x: gx + 4, y: my + 1, width: colW - 14, height: rowH - 2, rx: 9,
      fill: GOODS[m.good] ?? "#ddd", stroke: "#222", "data-market": m.good, "data-row": m.row }));
    g.append(s("text", { x: gx + (colW - 6) / 2, y: my + 15, "font-size": 12, "font-weight": 700, "text-anchor": "middle",
      fill: m.good === "spice" ? "#fff" : "#222" }, `$${m.price}`));
    g.append(s("text", { x: gx + (colW - 6) / 2, y: y + 34 + MARKET_ROWS * rowH, "font-size": 11, fill: "#2d6a4f",
      "text-anchor": "middle", "data-income": m.good }, `$${m.factory_income}`));
    svg.append(g);
  });
}

function drawBuildings(svg, view, y) {
  const x = 10;
  svg.append(s("text", { x, y, "font-size": 14, "font-weight": 700 }, "Buildings (next price)"));
  view.buildings.forEach((b, i) => {
    const by = y + 10 + i * 32;
    const g = s("g", { "data-target": `building:${b.id}`, "aria-label": `${title(b.id)}: ${b.price === null ? "none left" : `$${b.price}`}` });
    g.append(s("rect", { x, y: by, width: 320, height: 27, rx: 6, fill: "#eef3fb", stroke: "#6c7a89" }));
    g.append(s("text", { x: x + 8, y: by + 18, "font-size": 12, "font-weight": 600 }, title(b.id)));
    g.append(s("text", { x: x + 150, y: by + 18, "font-size": 12, "data-price": b.price ?? "" },
      b.price === null ? "none left" : `$${b.price} · ${b.left} left`));
    svg.append(g);
  });
}

function drawGallery(svg, view, y) {
  const x = 10, w = 62;
  svg.append(s("text", { x, y, "font-size": 14, "font-weight": 700 }, "Privileges (gallery / supply)"));
  COLUMNS.forEach((column, i) => {
    const gx = x + i * (w + 2);
    const g = s("g", { "data-target": `column:${column}`, "aria-label": `${title(column)} privileges` });
    g.append(s("rect", { x: gx, y: y + 10, width: w, height: 70, rx: 6, fill: "#f3ecfa", stroke: "#7d3c98" }));
    g.append(s("text", { x: gx + w / 2, y: y + 28, "font-size": 11, "font-weight": 700, "text-anchor": "middle" }, title(column)));
    g.append(s("text", { x: gx + w / 2, y: y + 52, "font-size": 18, "text-anchor": "middle", "data-gallery": column },
      view.gallery[column]));
    g.append(s("text", { x: gx + w / 2, y: y + 72, "font-size": 10, "text-anchor": "middle", fill: "#555" },
      `supply ${view.privilege_supply[column]}`));
    svg.append(g);
  });
}

// --- players -------------------------------------------------------------------------------

// A player's achievements per column of the sheet, as the rules count them (§7).
function achievements(p) {
  const colonies = Object.values(p.colonies).reduce((n, list) => n + list.length, 0);
  const factories = Object.values(p.factories).reduce((n, k) => n + k, 0) + p.wildcard_factories;
  return { colony: colonies, factory: factories, explorer: p.explorers, shipyard: p.shipyards, church: p.churches };
}

export function players(container, view, { seat } = {}) {
  clear(container, view.players.map((p) => {
    const score = view.scores.find((sc) => sc.seat === p.seat);
    const onBoard = p.ships.reduce((a, b) => a + b, 0);
    const where = p.ships.map((n, r) => (n ? `${n} ${view.regions[r].name}` : null)).filter(Boolean).join(", ");
    const colonies = Object.entries(p.colonies).filter(([, l]) => l.length)
      .map(([g, l]) => `${title(g)} ${l.map((c) => `$${c}`).join(" ")}`).join("; ") || "none";
    const factories = Object.entries(p.factories).filter(([, n]) => n).map(([g, n]) => `${n} ${g}`);
    const got = achievements(p);
    const rows = [
      ["Money", `$${p.money}`, "money"],
      ["Workers", p.workers, "workers"],
      ["Rondel", p.stone === null ? "not placed" : field(view, p.stone), "stone"],
      ["Ships", `${onBoard} at sea${where ? ` (${where})` : ""}, ${p.ships_in_supply} in supply`, "ships"],
      ["Colonies", colonies, "colonies"],
      ["Factories", [...factories, `${p.wildcard_factories} orange`].join(", "), "factories"],
      ["Buildings", `${plural(p.shipyards, "shipyard")}, ${plural(p.churches, "church", "churches")}`, "buildings"],
      ["Explorers", p.explorers, "explorers"],
      ["Achieved", COLUMNS.map((c) => `${c} ${got[c]}`).join(" · "), "achievements"],
      ["Privileges", COLUMNS.filter((c) => p.privileges[c]).map((c) => `${p.privileges[c]} ${c}`).join(", ") || "none", "privileges"],
      ["Score", score ? `${score.total} VP (place ${score.place})${score.king ? `, King: ${score.king}` : ""}` : "—", "score"],
    ];
    const card = view.card.holder === p.seat ? " · Navegador card" : "";
    return h("article", { class: `card player${p.seat === seat ? " me" : ""}`, "data-seat": p.seat },
      h("h3", {}, h("span", { class: "swatch", style: `background:${color(p.seat)}` }),
        p.name, p.seat === seat ? " (you)" : "", card),
      h("dl", {}, rows.flatMap(([k, v, key]) => [h("dt", {}, k), h("dd", { "data-field": key }, v)])));
  }));
}

// --- commands and events -------------------------------------------------------------------

export function label(c, view) {
  const me = view.players?.[c.seat];
  switch (c.type) {
    case "use_card": return "Use the Navegador card: sail first";
    case "rondel": {
      const cost = rondelCost(view, me?.stone, c.field);
      return `Move to ${field(view, c.field)}, ${cost ? `paying ${plural(cost, "ship")}` : "free"}`;
    }
    case "pay_ship": return `Pay a ship from ${regionName(view, c.region)}`;
    case "sail": return `Sail ${regionName(view, c.origin)} → ${regionName(view, c.destination)}`;
    case "explore": return `Explore ${regionName(view, c.region)} with ships from ${c.origins.map((o) => regionName(view, o)).join(", ")}`;
    case "found": {
      const price = view.regions.find((r) => r.id === c.region)?.tokens?.[0];
      return `Found a colony in ${regionName(view, c.region)}${price ? ` for $${price}` : ""}`;
    }
    case "build": {
      const price = view.buildings.find((b) => b.id === c.building)?.price;
      return `Build a ${words(c.building)}${price ? ` for $${price}` : ""}`;
    }
    case "sell": {
      const price = view.market.find((m) => m.good === c.good)?.price;
      return `Sell ${c.count} ${c.good}${price ? ` at $${price}` : ""}`;
    }
    case "process": {
      const each = view.market.find((m) => m.good === c.good)?.factory_income;
      return `Process ${c.count} ${c.good}${each ? ` for $${each} each` : ""}`;
    }
    case "recruit": return `Recruit ${plural(c.count, "worker")}`;
    case "buy_ships": return `Build ${plural(c.count, "ship")}`;
    case "privilege": return `Take a ${c.column} privilege`;
    case "pass": return view.stage === "pay" || view.stage === "turn" ? "Pass" : `End the ${words(view.stage)} action`;
    default: return generic.label(c);
  }
}

export function targets(c) {
  switch (c.type) {
    case "rondel": return [`rondel:${c.field}`];
    case "use_card": return ["card"];
    case "pay_ship": case "found": case "explore": return [`region:${c.region}`];
    case "sail": return [`region:${c.destination}`];
    case "build": return [`building:${c.building}`];
    case "sell": case "process": return [`good:${c.good}`];
    case "privilege": return [`column:${c.column}`];
    default: return [];
  }
}

export function describe(event, view) {
  const d = event.data ?? {};
  const name = typeof d.seat === "number" ? who(view, d.seat) : "";
  const region = (id) => regionName(view, id);
  switch (event.type) {
    case "game_created": return `A game of ${d.players.length} begins: ${d.players.join(", ")}`;
    case "setup": return `${who(view, d.start_player)} starts; ${who(view, d.card_holder)} holds the Navegador card`;
    case "turn_started": return `Turn ${d.turn}: ${name}`;
    case "card_used": return `${name} uses the Navegador card to sail first`;
    case "card_passed": return `The Navegador card passes to ${who(view, d.to)} (${words(d.reason)})`;
    case "rondel_moved": return `${name} moves to ${title(d.action)}${d.cost ? `, paying ${plural(d.cost, "ship")}` : ""}`;
    case "ship_paid": return `${name} pays a ship from ${region(d.region)}`;
    case "ship_sailed": return `${name} sails ${region(d.origin)} → ${region(d.destination)}`;
    case "explored": return `${name} explores ${region(d.region)}, loses ${plural(d.lost, "ship")}, bonus $${d.bonus}` +
      (d.tokens.length ? `; colonies ${d.tokens.map((t) => `$${t}`).join(" ")}` : "");
    case "end_triggered": return d.reason === "explored" ? `${name} explores ${region(d.region)}: the end is near`
      : `${name} takes the last building: the end is near`;
    case "colony_founded": return `${name} founds a ${d.good} colony in ${region(d.region)} for $${d.price}`;
    case "building_bought": return `${name} builds a ${words(d.building)} for $${d.price}`;
    case "goods_sold": return `${name} sells ${d.count} ${d.good} for $${d.income}`;
    case "goods_processed": return `${name} processes ${d.count} ${d.good} for $${d.income}`;
    case "workers_recruited": return `${name} recruits ${plural(d.gained, "worker")} for $${d.cost}${d.sold ? ` (sells ${d.sold} for $${d.income})` : ""}`;
    case "ships_bought": return `${name} builds ${plural(d.gained, "ship")} for $${d.cost}${d.sold ? ` (sells ${d.sold} for $${d.income})` : ""}`;
    case "privilege_taken": return `${name} takes a ${d.column} privilege, earning $${d.income}`;
    case "action_ended": return `${name} ends the ${words(d.action)} action`;
    case "turn_ended": return `${name}'s turn ends${d.final_turns_left !== null && d.final_turns_left !== undefined && d.final_turns_left >= 0 ? ` (${d.final_turns_left} final turns left)` : ""}`;
    case "phase_started": return `Phase ${PHASES[d.phase] ?? d.phase} begins`;
    case "game_ended": {
      const best = [...d.results].sort((a, b) => a.place - b.place)[0];
      return `The game ends: ${who(view, best.seat)} wins with ${best.total} VP`;
    }
    default: return generic.describe(event, view);
  }
}

export function summary(view) {
  return `Turn ${view.turn} · phase ${PHASES[view.phase] ?? view.phase} · ${words(view.stage)}`;
}
