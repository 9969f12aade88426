// The client's shell: the home page, a table (play or watch) and a replay, for any game of
// GET /games. What is game-specific (drawing the board, naming commands and events) comes
// from the game's drawing module, or from generic.js for a game without one.

import { ApiError, del, forgetSeat, get, post, savedSeat, saveSeat, seatRefused } from "./api.js";
import { TurnClock } from "./clock.js";
import { clear, forPeople, h, label, playerName, plural, readable } from "./dom.js";
import { DRAWN } from "./games/index.js";
import * as generic from "./games/generic.js";
import { GameStream, newCommandId } from "./ws.js";

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
// What the page shows, for people debugging it and for the browser tests.
const probe = (window.__caravel = { events: [], view: null, errors: [] });

// A game's drawing module; ?draw=generic shows any game as the fallback does (a game with no
// drawing module of its own looks like that).
async function gameModule(name) {
  if (!DRAWN.has(name) || new URLSearchParams(location.search).get("draw") === "generic") return generic;
  return { ...generic, ...(await import(`./games/${name}.js`)) };
}

function showError(element, error) {
  const text = error instanceof ApiError ? `${forPeople(error.message)} (${error.code})` : String(error?.message ?? error);
  element.textContent = text;
  probe.errors.push(text);
}

// Run a button's request with the button disabled until it answers: a double click sends
// it once (and the request's Idempotency-Key covers a retry).
async function busy(button, work) {
  if (button.disabled) return;
  button.disabled = true;
  try { await work(); } finally { button.disabled = false; }
}

// A page for an address that names nothing (an unknown table or game): say so, link home.
function notFound(what) {
  probe.notFound = true;
  document.title = "Not found · Caravel";
  clear($("main"), h("section", { class: "notfound", "data-testid": "not-found" },
    h("h1", {}, "Nothing here"),
    h("p", {}, `There is no ${what}: it may never have existed, or the link is mistyped.`),
    h("p", {}, h("a", { href: "/", "data-testid": "home-link" }, "Back to the home page"),
      ": its lists show the open, running and finished tables.")));
}

const gameTitle = (catalog, name) => catalog.find((g) => g.name === name)?.title ?? readable(name);

// --- home ----------------------------------------------------------------------------------

async function home() {
  const catalog = await get("/games");
  clear($("catalog"), catalog.map((g) => h("article", { class: "card" },
    h("h3", {}, g.title),
    h("p", {}, `${g.min_players}–${g.max_players} players · rulesets: ${g.rulesets.map(readable).join(", ")}`),
    h("p", {}, `Bots: ${g.bot_levels.map(readable).join(", ")}`))));
  createForm(catalog);
  quickMatch(catalog);
  tables(catalog);
  leaderboard();
}

function createForm(catalog) {
  const form = $("create");
  const select = form.elements.game;
  clear(select, catalog.map((g) => h("option", { value: g.name }, g.title)));
  const game = () => catalog.find((g) => g.name === select.value);
  const seatsInput = form.elements.seats;
  const kinds = () => {
    const g = game();
    seatsInput.min = g.min_players; seatsInput.max = g.max_players;
    const n = Math.min(Math.max(Number(seatsInput.value) || g.max_players, g.min_players), g.max_players);
    seatsInput.value = n;
    clear($("seat-kinds"), Array.from({ length: n }, (_, seat) => h("label", {}, `Seat ${seat + 1}`,
      h("select", { name: `seat-${seat}`, "data-seat": seat },
        h("option", { value: "you", selected: seat === 0 }, "You"),
        h("option", { value: "open" }, "Another person"),
        g.bot_levels.map((level) => h("option", { value: `bot:${level}`, selected: seat > 0 && level === (g.bot_levels.includes("greedy") ? "greedy" : g.bot_levels[0]) }, `${readable(level)} bot`))))));
    const props = g.options.properties ?? {};
    clear($("options"), Object.keys(props).length ? Object.entries(props).map(([name, schema]) => h("label", {}, label(g.labels, "options", name),
      schema.enum ? h("select", { name: `option-${name}` }, schema.enum.map((v) => h("option", { value: v, selected: v === schema.default }, label(g.labels, "values", v))))
        : h("input", { name: `option-${name}`, value: schema.default ?? "" }))) : h("p", {}, "This game has no options."));
  };
  select.addEventListener("change", kinds);
  seatsInput.addEventListener("change", kinds);
  kinds();
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(form.querySelector("button[type=submit]"), () => createTable(form, game()));
  });
}

// The form's table: made, joined at "You", started unless a seat waits for another person.
async function createTable(form, g) {
  $("create-error").textContent = "";
  const seats = Number(form.elements.seats.value);
  const choice = [...form.querySelectorAll("select[data-seat]")].map((s) => s.value);
  const bots = Object.fromEntries(choice.flatMap((v, seat) => v.startsWith("bot:") ? [[seat, v.slice(4)]] : []));
  const options = {};
  for (const [name, schema] of Object.entries(g.options.properties ?? {})) {
    const raw = form.elements[`option-${name}`].value;
    options[name] = schema.type === "integer" ? Number(raw) : raw;
  }
  try {
    const table = await post("/tables", { game: g.name, seats, bots, options, deadline_s: Number(form.elements.deadline_s.value) }, { idempotent: true });
    const mine = choice.indexOf("you");
    if (mine >= 0) {
      const joined = await post(`/tables/${table.id}/join`, { name: form.elements.name.value, seat: mine }, { idempotent: true });
      saveSeat(table.id, { seat: joined.seat, token: joined.token, name: form.elements.name.value });
      if (!choice.includes("open")) await post(`/tables/${table.id}/start`, {}, { token: joined.token, idempotent: true });
    }
    location.assign(`/tables/${encodeURIComponent(table.id)}`);
    await new Promise(() => {}); // the button stays disabled while the next page loads
  } catch (error) { showError($("create-error"), error); }
}

function quickMatch(catalog) {
  const form = $("quick");
  const find = form.querySelector("button[type=submit]");
  const cancel = $("quick-cancel");
  clear(form.elements.game, catalog.map((g) => h("option", { value: g.name }, g.title)));
  let waiting = null; // the ticket while queued
  cancel.addEventListener("click", () => busy(cancel, async () => {
    const ticket = waiting;
    try {
      await del(`/queue/${ticket.ticket}`);
      waiting = null;
      cancel.hidden = true;
      $("quick-status").textContent = "You left the queue.";
    } catch (error) {
      if (error.code !== "ticket_matched") showError($("quick-error"), error);
    }
  }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (waiting) return;
    busy(find, async () => {
      $("quick-error").textContent = "";
      try {
        const name = form.elements.name.value;
        let ticket = waiting = await post("/queue", { game: form.elements.game.value, name, players: Number(form.elements.players.value) }, { idempotent: true });
        $("quick-status").textContent = "Waiting for players…";
        cancel.hidden = false;
        while (ticket.status !== "matched") {
          await sleep(500);
          if (waiting !== ticket && waiting?.ticket !== ticket.ticket) return; // cancelled
          ticket = await get(`/queue/${ticket.ticket}`);
        }
        saveSeat(ticket.table_id, { seat: ticket.seat, token: ticket.token, name });
        location.assign(`/tables/${encodeURIComponent(ticket.table_id)}`);
        await new Promise(() => {});
      } catch (error) { showError($("quick-error"), error); }
      finally { cancel.hidden = true; waiting = null; }
    });
  });
}

async function tables(catalog) {
  const name = (game) => gameTitle(catalog, game);
  for (const status of ["open", "running", "finished"]) {
    const list = await get(`/tables?status=${status}`);
    const link = (t) => status === "finished" ? h("a", { href: `/games/${t.id}/replay` }, "Replay")
      : h("a", { href: `/tables/${t.id}` }, status === "open" ? "Join or watch" : "Watch");
    clear($(`tables-${status}`), list.length ? list.slice(0, 20).map((t) => h("div", { class: "row" },
      h("span", {}, `${name(t.game)} · ${t.taken.length} of ${plural(t.seats, "seat")} taken · ${t.taken.map((s) => s.name).join(", ")}`),
      link(t))) : h("p", {}, "None."));
  }
}

async function leaderboard() {
  const leaders = await get("/leaderboard");
  clear($("leaders"), leaders.length ? h("table", { class: "data" },
    h("thead", {}, h("tr", {}, ["#", "Player", "Rating", "Games", "Wins"].map((c) => h("th", {}, c)))),
    h("tbody", {}, leaders.slice(0, 20).map((l) => h("tr", {}, [l.rank, playerName(l.player), l.ordinal.toFixed(1), l.games, l.wins].map((c) => h("td", {}, c))))))
    : h("p", {}, "No rated games yet."));
}

// --- a table: play or watch ----------------------------------------------------------------

async function tablePage() {
  const tableId = decodeURIComponent(location.pathname.split("/")[2]);
  let table;
  try { table = await get(`/tables/${encodeURIComponent(tableId)}`); }
  catch (error) { if (error.code === "unknown_table") { notFound(`table ${tableId}`); return; } throw error; }
  const name = gameTitle(await get("/games"), table.game);
  $("title").textContent = `${name} · table ${table.id}`;
  document.title = `${name} · Caravel`;
  let seat = savedSeat(tableId);
  const board = document.querySelector(".play");
  board.hidden = table.status === "open"; // nothing to draw before the game starts
  if (table.status === "open") table = await waitForStart(table, (s) => { seat = s; });
  $("join").hidden = true;
  board.hidden = false;
  await followGame(table, seat);
}

// The seats of an open table, one line each (who holds it, or free), and the link to share.
function seatList(table) {
  const byNumber = new Map(table.taken.map((t) => [t.seat, t]));
  return [
    h("ul", { class: "seats", "data-testid": "seat-list" }, Array.from({ length: table.seats }, (_, i) => {
      const t = byNumber.get(i);
      return h("li", { "data-seat": i }, `Seat ${i + 1}: `, t ? t.name : h("em", {}, "free"));
    })),
    h("p", {}, "Invite others with this link: ",
      h("input", { readonly: true, value: location.href.split("?")[0], "aria-label": "Invitation link", "data-testid": "invite", class: "invite",
        onfocus: (e) => e.target.select() })),
  ];
}

async function waitForStart(table, seated) {
  const panel = $("join");
  panel.hidden = false;
  let seat = savedSeat(table.id);
  const holds = (s) => table.taken.some((t) => t.seat === s.seat && t.kind === "human" && !t.left && (s.name === undefined || t.name === s.name));
  if (seat && !holds(seat)) { forgetSeat(table.id); seat = null; seated(null); } // left, or another's now
  const refused = (error) => {
    if (!seatRefused(error)) { showError($("error"), error); return; }
    forgetSeat(table.id); seat = null; seated(null); $("error").textContent = ""; draw();
  };
  const draw = () => {
    const free = Array.from({ length: table.seats }, (_, i) => i).filter((i) => !table.taken.some((t) => t.seat === i));
    if (!seat) {
      const name = h("input", { name: "name", required: true, maxlength: 64, value: "Player", "aria-label": "Your name" });
      const which = h("select", { name: "seat", "aria-label": "Seat" }, free.map((i) => h("option", { value: i }, `Seat ${i + 1}`)));
      const join = h("button", {}, "Join");
      clear(panel, h("h2", {}, "Join this table"),
        h("p", {}, `${table.taken.length} of ${plural(table.seats, "seat")} taken. Stay without joining to watch.`),
        seatList(table),
        free.length ? h("form", { onsubmit: (e) => {
          e.preventDefault();
          busy(join, async () => {
            try {
              const joined = await post(`/tables/${table.id}/join`, { name: name.value, seat: Number(which.value) }, { idempotent: true });
              seat = { seat: joined.seat, token: joined.token, name: name.value };
              saveSeat(table.id, seat); seated(seat);
              table = await get(`/tables/${table.id}`); draw();
            } catch (error) { showError($("error"), error); }
          });
        } }, h("label", {}, "Your name ", name), " ", h("label", {}, "Seat ", which), " ", join) : h("p", {}, "Every seat is taken."));
    } else {
      const level = h("select", { "aria-label": "Bot level for free seats" }, ["greedy", "random", "mcts"].map((l) => h("option", { value: l }, readable(l))));
      const start = h("button", { onclick: () => busy(start, async () => {
        try { table = await post(`/tables/${table.id}/start`, { fill_with_bots: free.length ? level.value : null }, { token: seat.token, idempotent: true }); }
        catch (error) { refused(error); }
      }) }, free.length ? "Start with bots" : "Start");
      const leave = h("button", { class: "secondary", "data-testid": "leave", onclick: () => busy(leave, async () => {
        try { await post(`/tables/${table.id}/leave`, undefined, { token: seat.token }); }
        catch (error) { if (!seatRefused(error)) { showError($("error"), error); return; } }
        refused(new ApiError(403, "not_seated", "left"));
        table = await get(`/tables/${table.id}`); draw();
      }) }, "Leave");
      clear(panel, h("h2", {}, `You hold seat ${seat.seat + 1}`),
        h("p", {}, free.length ? `${plural(free.length, "seat is", "seats are")} free: wait for players, or start with bots.` : "Every seat is taken."),
        seatList(table),
        h("div", { class: "buttons" }, start, " ", free.length ? h("label", {}, "Bots: ", level) : null, " ", leave));
    }
  };
  draw();
  while (table.status === "open") {
    await sleep(1000);
    const now = await get(`/tables/${table.id}`);
    const changed = JSON.stringify(now.taken) !== JSON.stringify(table.taken);
    table = now;
    if (changed && table.status === "open") draw();
  }
  return table;
}

// Keys 1 to 9 play the moves listed (bound once: the list is read when a key is pressed).
document.addEventListener("keydown", (e) => {
  if (document.body.dataset.page !== "table") return;
  if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.ctrlKey || e.metaKey || e.altKey) return;
  const n = Number(e.key);
  if (n >= 1 && n <= 9) $("moves").querySelectorAll("button[data-testid=move]")[n - 1]?.click();
});

async function followGame(table, seatInfo) {
  const id = table.id, token = seatInfo?.token, mine = seatInfo?.seat ?? null;
  const game = await gameModule(table.game);
  const clock = new TurnClock(h("span", { class: "clock", "data-testid": "clock" }));
  let view = null, refreshing = false, again = false, sending = false, played = 0, active = true;
  probe.seat = mine;
  $("moves-h").textContent = token ? "Your moves" : "Watching";
  const leave = h("button", { type: "button", class: "secondary", "data-testid": "leave", onclick: () => busy(leave, async () => {
    if (!confirm("Leave this game? A bot plays your seat from now on, and you watch.")) return;
    try { await post(`/tables/${id}/leave`, undefined, { token }); }
    catch (error) { if (!seatRefused(error)) { showError($("error"), error); return; } }
    spectate();
  }) }, "Leave the game");
  clear($("status"), token ? [`You play seat ${mine + 1}. `, leave] : "You are watching (public view).");

  // The seat is not this browser's any more (it left, or the token expired or is another
  // table's): forget the token and follow the game as a spectator, at once and once.
  const spectate = () => {
    if (!active) return;
    active = false;
    stream.close();
    clock.clear();
    forgetSeat(id);
    probe.spectated = (probe.spectated ?? 0) + 1;
    clear($("log"));
    $("error").textContent = "";
    followGame(table, null);
  };

  const unlogged = []; // events that came before the first view: described once it is here
  const logEvent = (event) => {
    const log = $("log");
    log.append(h("li", { value: event.version }, game.describe(event, view)));
    while (log.children.length > 300) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
  };

  const render = (next) => {
    if (!active) return;
    view = probe.view = next;
    unlogged.splice(0).forEach(logEvent);
    game.draw($("board"), view, { seat: mine, yours: (view.legal_commands ?? []).length > 0 });
    fitText($("board"));
    game.players($("players"), view, { seat: mine });
    moves(token ? view.legal_commands ?? [] : []);
  };

  const moves = (legal) => {
    const yours = legal.length > 0 && !sending;
    const turn = $("turn");
    turn.className = `turn${yours ? " yours" : ""}`;
    const who = (view.pending ?? []).filter((p) => p.seat !== mine).map((p) => generic.seatName(view, p.seat));
    const note = view.phase === "over" ? "Game over" : sending ? "Sending your move…"
      : who.length ? `Waiting for ${[...new Set(who)].join(", ")}` : game.summary(view);
    clear(turn, yours ? h("strong", { "data-testid": "your-turn" }, "Your turn") : h("span", {}, note), clock.element);
    if (legal.length === 0 && token) clock.clear(); // a move on its way keeps the clock
    clear($("moves"), !token ? h("p", {}, view.phase === "over" ? "The game is over." : "You are watching: every seat of this game is taken.") : legal.length === 0 ? h("p", {}, "Nothing to decide now.") :
      legal.map((command, i) => h("button", { type: "button", "data-testid": "move", "data-index": i, disabled: sending,
        onclick: () => play(command) }, i < 9 ? h("span", { class: "key" }, i + 1) : null, game.label(command, view))));
    highlight(yours ? legal : []);
  };

  const highlight = (legal) => {
    const byTarget = new Map();
    legal.forEach((command, i) => game.targets(command).forEach((t) => byTarget.set(t, [...(byTarget.get(t) ?? []), i])));
    for (const [target, indices] of byTarget) {
      for (const element of $("board").querySelectorAll(`[data-target="${CSS.escape(target)}"]`)) {
        element.classList.add("target");
        element.setAttribute("tabindex", "0");
        element.setAttribute("role", "button");
        const pick = () => {
          if (view.legal_commands !== legal || sending) return; // drawn for an older view
          if (indices.length === 1) { play(legal[indices[0]]); return; }
          const buttons = [...$("moves").querySelectorAll("button")];
          buttons.forEach((b, j) => { b.classList.toggle("secondary", !indices.includes(j)); });
          buttons[indices[0]]?.focus();
        };
        element.addEventListener("click", pick);
        element.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
      }
    }
  };

  const play = async (command) => {
    if (sending) return;
    sending = true;
    moves(view.legal_commands ?? []);
    const { seat: _seat, ...body } = command;
    try {
      // Over the seat's socket while it is open; over HTTP otherwise, and again over HTTP
      // under the same id if the socket dropped before answering (played once either way).
      const sent = { ...body, command_id: newCommandId() };
      const overHttp = () => post(`/games/${id}/commands`, sent, { token });
      const answer = !stream.live ? await overHttp() : await stream.command(sent).catch((error) => {
        if (error.code === "socket_closed") return overHttp();
        throw error;
      });
      played = probe.played = Math.max(played, answer.version ?? 0); // no older view again
      $("error").textContent = "";
      view = { ...view, legal_commands: [] }; // the next view brings the next decision
    } catch (error) {
      showError($("error"), error);
    } finally {
      sending = false;
      moves(view.legal_commands ?? []);
      refresh();
    }
  };
  probe.play = play; // a test sends a refused move through the page's own path

  const refresh = async () => {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do {
        again = false;
        let next;
        try { next = await get(`/games/${id}/view`, { token }); }
        catch (error) {
          if (seatRefused(error)) { spectate(); return; }
          if (error.code !== "unknown_game") throw error;
          await sleep(150); again = true; continue; // the views projection has not seen it yet
        }
        if (next.version < Math.max(stream.version, played)) { await sleep(80); again = true; continue; }
        if (!view || next.version >= view.version) render(next);
      } while (again && active);
    } catch (error) { showError($("error"), error); } finally { refreshing = false; }
  };

  const stream = new GameStream(id, {
    token,
    onEvent: (event) => {
      if (!active) return;
      probe.events.push({ version: event.version, type: event.type, at: Date.now() });
      if (view) logEvent(event); else unlogged.push(event);
      refresh();
    },
    onDecision: (decision) => { if (active) { clock.start(decision.deadline); refresh(); } },
    onState: (state) => {
      if (!active) return;
      $("connection").textContent = state; probe.connection = state;
      const refusal = /^closed: (\w+)/.exec(state)?.[1];
      if (token && refusal && seatRefused(new ApiError(403, refusal, state))) spectate();
    },
    onEnd: () => { refresh(); showResult(id); },
    onRestart: () => { // the log went back: forget what it no longer has
      if (view) view = { ...view, version: 0, legal_commands: [] }; // any view replaces it
      played = 0; unlogged.length = 0;
      clear($("log"));
    },
  });
  probe.stream = stream;
  stream.open();
}

// Board text no smaller than 11 px on a phone: a drawing whose smallest text would shrink
// below it keeps a width at which it does not (--fit-width, used by the stylesheet on narrow
// screens), and the board scrolls (pans) sideways instead.
const MIN_TEXT_PX = 11;
function fitText(board) {
  for (const svg of board.querySelectorAll("svg")) {
    const width = svg.viewBox?.baseVal?.width;
    const sizes = [...svg.querySelectorAll("text")].map((t) => parseFloat(getComputedStyle(t).fontSize)).filter((n) => n > 0);
    if (!width || !sizes.length) continue;
    svg.style.setProperty("--fit-width", `${Math.ceil(MIN_TEXT_PX * width / Math.min(...sizes))}px`);
  }
}

async function showResult(id) {
  for (let i = 0; i < 100; i++) { // the scoring service records the end shortly after it
    const standings = await get(`/games/${id}/standings`);
    if (standings.status === "finished") break;
    await sleep(200);
  }
  const result = await get(`/games/${id}/result`);
  probe.result = result;
  $("result").hidden = false;
  // A player by the seat's name at this table ("Greedy bot 2"), else by their scoring id.
  const who = (r) => probe.view?.players?.[r.seat]?.name ?? playerName(r.player);
  const winners = result.results.filter((r) => r.won).map((r) => `${who(r)} (${r.side})`);
  clear($("result-body"), h("p", { "data-testid": "winner" }, `${winners.length === 1 ? "Winner" : "Winners"}: ${winners.join(", ")}`),
    h("table", { class: "data" },
      h("thead", {}, h("tr", {}, ["Place", "Player", "Side", "Total"].map((c) => h("th", {}, c)))),
      h("tbody", {}, result.results.slice().sort((a, b) => a.place - b.place).map((r) => h("tr", { "data-testid": "result-row", "data-seat": r.seat },
        [r.place, who(r), r.side, r.total].map((c) => h("td", {}, c)))))),
    h("p", {}, h("a", { href: `/games/${id}/replay` }, "Watch the replay")));
}

// --- replay --------------------------------------------------------------------------------

async function replayPage() {
  const id = decodeURIComponent(location.pathname.split("/")[2]);
  let end;
  try { end = await get(`/games/${encodeURIComponent(id)}/replay/view`); }
  catch (error) {
    if (error.code === "unknown_game") { notFound(`finished game ${id} to replay`); return; }
    $("controls").hidden = true; // nothing to step through
    if (error.code !== "game_not_finished") throw error;
    clear($("error"), "This game is still being played: a replay opens once it is over. ",
      h("a", { href: `/tables/${encodeURIComponent(id)}` }, "Watch it live"));
    return;
  }
  const game = await gameModule(end.view.game);
  const name = gameTitle(await get("/games"), end.view.game);
  $("title").textContent = `Replay of ${name} · ${id}`;
  const events = [];
  await new Promise((done) => {
    const stream = new GameStream(id, { onEvent: (e) => events.push(e), onEnd: done });
    stream.open();
  });
  const steps = events.map((e) => e.version);
  Object.assign(probe, { steps, index: 0 });
  const slider = $("step");
  slider.max = String(steps.length - 1);
  let index = 0, timer = null, shown = 0;
  const show = async (i) => {
    index = Math.max(0, Math.min(steps.length - 1, i));
    slider.value = String(index);
    const asked = ++shown;
    const at = await get(`/games/${encodeURIComponent(id)}/replay/view?version=${steps[index]}`);
    if (asked !== shown) return;
    probe.view = at.view; probe.index = index;
    game.draw($("board"), at.view, {});
    fitText($("board"));
    game.players($("players"), at.view, {});
    $("where").textContent = `step ${index + 1} of ${steps.length} · version ${steps[index]}`;
    $("event").textContent = game.describe(events[index], at.view);
    probe.shown = index;
  };
  const pause = () => { clearInterval(timer); timer = null; $("play").textContent = "Play"; $("play").setAttribute("aria-label", "Play"); };
  const playing = () => {
    if (timer) { pause(); return; }
    $("play").textContent = "Pause"; $("play").setAttribute("aria-label", "Pause");
    timer = setInterval(() => { if (index >= steps.length - 1) pause(); else show(index + 1); }, 1000 / Number($("speed").value));
  };
  $("first").onclick = () => show(0);
  $("prev").onclick = () => show(index - 1);
  $("next").onclick = () => show(index + 1);
  $("last").onclick = () => show(steps.length - 1);
  $("play").onclick = playing;
  $("speed").onchange = () => { if (timer) { pause(); playing(); } };
  slider.oninput = () => show(Number(slider.value));
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
    if (e.key === "ArrowLeft") show(index - 1);
    else if (e.key === "ArrowRight") show(index + 1);
    else if (e.key === "Home") show(0);
    else if (e.key === "End") show(steps.length - 1);
    else if (e.key === " ") { e.preventDefault(); playing(); }
  });
  await show(0);
}

const pages = { home, table: tablePage, replay: replayPage };
pages[document.body.dataset.page]?.().catch((error) => showError($("error") ?? $("create-error"), error));
