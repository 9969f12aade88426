// Small helpers to build HTML and SVG elements (no framework, no build step).

const SVG = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const h = (tag, attrs, ...children) => fill(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => fill(document.createElementNS(SVG, tag), attrs, children);

export function clear(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

export const words = (id) => String(id).replaceAll("_", " ");
export const title = (id) => words(id).replace(/\b\w/g, (c) => c.toUpperCase());

// "1 seat", "3 seats": a count with its noun.
export const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// An id as people read it: "navy_vp_per_ship" → "Navy vp per ship" (a game's labels, when it
// has one for the id, say it better: see label()).
export const readable = (id) => {
  const w = words(id).trim().replace(/\bvp\b/gi, "VP");
  return w.charAt(0).toUpperCase() + w.slice(1);
};

// The game's label of an id (from GET /games: labels by namespace), else the id made readable.
export const label = (labels, space, id) => labels?.[space]?.[id] ?? readable(id);

// A player as the scoring service names them ("player:Tess", "bot:greedy") for people.
export function playerName(id) {
  const text = String(id);
  if (text.startsWith("player:")) return text.slice(7);
  if (text.startsWith("bot:")) return `${readable(text.slice(4))} bot`;
  return text;
}

// The API counts seats from 0 (as its JSON does); people count them from 1. A refusal's
// message is shown with its seat numbers as people count them.
export const forPeople = (message) => String(message)
  .replace(/\b(seats?) (\d+)( to (\d+))?/gi, (_, word, a, __, b) => `${word} ${Number(a) + 1}${b === undefined ? "" : ` to ${Number(b) + 1}`}`)
  .replace(/\b(seats) \[([\d, ]+)\]/gi, (_, word, list) => `${word} ${list.split(",").map((n) => Number(n) + 1).join(", ")}`);
