// Any game, drawn from its view alone: the view as a readable tree, its players as panels,
// each legal command as a button labelled with its fields. A game with no drawing module of
// its own is playable with this (and a drawing module may reuse any part of it).

import { h, clear, words } from "../dom.js";

export function draw(board, view) {
  clear(board, h("div", { class: "tree", "data-testid": "view-tree" }, tree(view, "view", true)));
}

function tree(value, name, open = false) {
  if (value === null || typeof value !== "object") {
    return h("div", {}, h("strong", {}, `${name}: `), value === null ? "—" : String(value));
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  if (entries.length === 0) return h("div", {}, h("strong", {}, `${name}: `), Array.isArray(value) ? "none" : "{}");
  if (entries.every(([, v]) => v === null || typeof v !== "object") && entries.length <= 8) {
    const text = entries.map(([k, v]) => (Array.isArray(value) ? String(v) : `${words(k)} ${v}`)).join(", ");
    return h("div", {}, h("strong", {}, `${words(name)}: `), text);
  }
  return h("details", { open }, h("summary", {}, `${words(name)} (${entries.length})`),
    entries.map(([k, v]) => tree(v, k)));
}

export function players(container, view, { seat } = {}) {
  if (!Array.isArray(view.players)) { clear(container); return; }
  clear(container, view.players.map((player, index) => {
    const number = player.seat ?? index;
    return h("article", { class: `card player${number === seat ? " me" : ""}` },
      h("h3", {}, player.name ?? `Seat ${number + 1}`),
      h("div", { class: "tree" }, Object.entries(player).map(([k, v]) => tree(v, k))));
  }));
}

export function label(command) {
  const fields = Object.entries(command).filter(([k]) => k !== "type" && k !== "seat");
  const text = fields.map(([k, v]) => `${words(k)} ${Array.isArray(v) ? v.join("+") || "none" : v ?? "none"}`);
  return [words(command.type), ...text].join(" · ");
}

export function targets() { return []; }

export function describe(event, view) {
  const data = event.data ?? {};
  const who = typeof data.seat === "number" ? `${seatName(view, data.seat)}: ` : "";
  const rest = Object.entries(data).filter(([k]) => k !== "seat")
    .map(([k, v]) => `${words(k)} ${typeof v === "object" ? JSON.stringify(v) : v}`);
  return `${who}${words(event.type)}${rest.length ? ` (${rest.join(", ")})` : ""}`;
}

export function seatName(view, seat) {
  const player = view?.players?.[seat];
  return player?.name ?? `Seat ${seat + 1}`;
}

export function summary(view) {
  return ["turn", "round", "age", "phase"].filter((k) => view[k] !== undefined)
    .map((k) => `${words(k)} ${view[k]}`).join(" · ");
}
