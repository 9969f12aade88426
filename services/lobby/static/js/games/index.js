// The games that have a drawing module of their own; any other game is shown by generic.js.
export const DRAWN = new Set(["age_of_discovery", "navegador"]);
