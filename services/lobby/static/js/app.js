// The client's shell: the home page, a table (play or watch) and a replay, for any game of
// GET /games. What is game-specific (drawing the board, naming commands and events) comes
// from the game's drawing module, or from generic.js for a game without one.

import { ApiError, get, post, savedSeat, saveSeat } from "./api.js";
import { TurnClock } from "./clock.js";
import { clear, h, title, words } from "./dom.js";
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
  const text = error instanceof ApiError ? `${error.message} (${error.code})` : String(error?.message ?? error);
  element.textContent = text;
  probe.errors.push(text);
}

// --- home ----------------------------------------------------------------------------------

async function home() {
  const catalog = await get("/games");
  clear($("catalog"), catalog.map((g) => h("article", { class: "card" },
    h("h3", {}, g.title),
    h("p", {}, `${g.min_players}–${g.max_players} players · rulesets: ${g.rulesets.join(", ")}`),
    h("p", {}, `Bots: ${g.bot_levels.join(", ")}`))));
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
        g.bot_levels.map((level) => h("option", { value: `bot:${level}`, selected: seat > 0 && level === (g.bot_levels.includes("greedy") ? "greedy" : g.bot_levels[0]) }, `Bot (${level})`))))));
    const props = g.options.properties ?? {};
    clear($("options"), Object.entries(props).map(([name, schema]) => h("label", {}, title(name),
      schema.enum ? h("select", { name: `option-${name}` }, schema.enum.map((v) => h("option", { value: v, selected: v === schema.default }, v)))
        : h("input", { name: `option-${name}`, value: schema.default ?? "" }))));
  };
  select.addEventListener("change", kinds);
  seatsInput.addEventListener("change", kinds);
  kinds();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    $("create-error").textContent = "";
    const g = game();
    const seats = Number(seatsInput.value);
    const choice = [...form.querySelectorAll("select[data-seat]")].map((s) => s.value);
    const bots = Object.fromEntries(choice.flatMap((v, seat) => v.startsWith("bot:") ? [[seat, v.slice(4)]] : []));
    const options = {};
    for (const [name, schema] of Object.entries(g.options.properties ?? {})) {
      const raw = form.elements[`option-${name}`].value;
      options[name] = schema.type === "integer" ? Number(raw) : raw;
    }
    try {
      const table = await post("/tables", { game: g.name, seats, bots, options, deadline_s: Number(form.elements.deadline_s.value) });
      const mine = choice.indexOf("you");
      if (mine >= 0) {
        const joined = await post(`/tables/${table.id}/join`, { name: form.elements.name.value, seat: mine });
        saveSeat(table.id, { seat: joined.seat, token: joined.token, name: form.elements.name.value });
        if (!choice.includes("open")) await post(`/tables/${table.id}/start`, {}, { token: joined.token });
      }
      location.assign(`/tables/${encodeURIComponent(table.id)}`);
    } catch (error) { showError($("create-error"), error); }
  });
}

function quickMatch(catalog) {
  const form = $("quick");
  clear(form.elements.game, catalog.map((g) => h("option", { value: g.name }, g.title)));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    $("quick-error").textContent = "";
    try {
      const name = form.elements.name.value;
      let ticket = await post("/queue", { game: form.elements.game.value, name, players: Number(form.elements.players.value) });
      $("quick-status").textContent = "Waiting for players…";
      while (ticket.status !== "matched") {
        await sleep(500);
        ticket = await get(`/queue/${ticket.ticket}`);
      }
      saveSeat(ticket.table_id, { seat: ticket.seat, token: ticket.token, name });
      location.assign(`/tables/${encodeURIComponent(ticket.table_id)}`);
    } catch (error) { showError($("quick-error"), error); }
  });
}

async function tables(catalog) {
  const name = (game) => catalog.find((g) => g.name === game)?.title ?? title(game);
  for (const status of ["open", "running", "finished"]) {
    const list = await get(`/tables?status=${status}`);
    const link = (t) => status === "finished" ? h("a", { href: `/games/${t.id}/replay` }, "Replay")
      : h("a", { href: `/tables/${t.id}` }, status === "open" ? "Join or watch" : "Watch");
    clear($(`tables-${status}`), list.length ? list.slice(0, 20).map((t) => h("div", { class: "row" },
      h("span", {}, `${name(t.game)} · ${t.taken.length}/${t.seats} seated · ${t.taken.map((s) => s.name).join(", ")}`),
      link(t))) : h("p", {}, "None."));
  }
}

async function leaderboard() {
  const leaders = await get("/leaderboard");
  clear($("leaders"), leaders.length ? h("table", { class: "data" },
    h("thead", {}, h("tr", {}, ["#", "Player", "Rating", "Games", "Wins"].map((c) => h("th", {}, c)))),
    h("tbody", {}, leaders.slice(0, 20).map((l) => h("tr", {}, [l.rank, l.player, l.ordinal.toFixed(1), l.games, l.wins].map((c) => h("td", {}, c))))))
    : h("p", {}, "No rated games yet."));
}

// --- a table: play or watch ----------------------------------------------------------------

async function tablePage() {
  const tableId = decodeURIComponent(location.pathname.split("/")[2]);
  let table = await get(`/tables/${encodeURIComponent(tableId)}`);
  const name = (await get("/games")).find((g) => g.name === table.game)?.title ?? title(table.game);
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

async function waitForStart(table, seated) {
  const panel = $("join");
  panel.hidden = false;
  let seat = savedSeat(table.id);
  const draw = () => {
    const free = Array.from({ length: table.seats }, (_, i) => i).filter((i) => !table.taken.some((t) => t.seat === i));
    if (!seat) {
      const name = h("input", { name: "name", required: true, maxlength: 64, value: "Player", "aria-label": "Your name" });
      const which = h("select", { name: "seat", "aria-label": "Seat" }, free.map((i) => h("option", { value: i }, `Seat ${i + 1}`)));
      clear(panel, h("h2", {}, "Join this table"),
        h("p", {}, `${table.taken.length} of ${table.seats} seats taken. Stay without joining to watch.`),
        h("form", { onsubmit: async (e) => {
          e.preventDefault();
          try {
            const joined = await post(`/tables/${table.id}/join`, { name: name.value, seat: Number(which.value) });
            seat = { seat: joined.seat, token: joined.token, name: name.value };
            saveSeat(table.id, seat); seated(seat); draw();
          } catch (error) { showError($("error"), error); }
        } }, h("label", {}, "Your name ", name), " ", h("label", {}, "Seat ", which), " ", h("button", {}, "Join")));
    } else {
      const level = h("select", { "aria-label": "Bot level for free seats" }, ["greedy", "random", "mcts"].map((l) => h("option", { value: l }, l)));
      clear(panel, h("h2", {}, `You hold seat ${seat.seat + 1}`),
        h("p", {}, free.length ? `${free.length} seats are free: wait for players, or start with bots.` : "Every seat is taken."),
        h("button", { onclick: async () => {
          try { table = await post(`/tables/${table.id}/start`, { fill_with_bots: free.length ? level.value : null }, { token: seat.token }); }
          catch (error) { showError($("error"), error); }
        } }, free.length ? "Start with bots" : "Start"), " ", free.length ? h("label", {}, "Bots: ", level) : null);
    }
  };
  draw();
  while (table.status === "open") {
    await sleep(1000);
    const now = await get(`/tables/${table.id}`);
    if (now.taken.length !== table.taken.length) { table = now; draw(); } else table = now;
  }
  return table;
}

async function followGame(table, seatInfo) {
  const id = table.id, token = seatInfo?.token, mine = seatInfo?.seat ?? null;
  const game = await gameModule(table.game);
  const clock = new TurnClock(h("span", { class: "clock", "data-testid": "clock" }));
  let view = null, refreshing = false, again = false, sending = false, played = 0;
  $("moves-h").textContent = token ? "Your moves" : "Watching";
  $("status").textContent = token ? `You play seat ${mine + 1}.` : "You are watching (public view).";

  const unlogged = []; // events that came before the first view: described once it is here
  const logEvent = (event) => {
    const log = $("log");
    log.append(h("li", { value: event.version }, game.describe(event, view)));
    while (log.children.length > 300) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
  };

  const render = (next) => {
    view = probe.view = next;
    unlogged.splice(0).forEach(logEvent);
    game.draw($("board"), view, { seat: mine });
    game.players($("players"), view, { seat: mine });
    moves(token ? view.legal_commands ?? [] : []);
  };

  const moves = (legal) => {
    const yours = legal.length > 0 && !sending;
    const turn = $("turn");
    turn.className = `turn${yours ? " yours" : ""}`;
    const who = (view.pending ?? []).map((p) => generic.seatName(view, p.seat));
    clear(turn, yours ? h("strong", { "data-testid": "your-turn" }, "Your turn") :
      h("span", {}, view.phase === "over" ? "Game over" : who.length ? `Waiting for ${[...new Set(who)].join(", ")}` : game.summary(view)), clock.element);
    if (!yours) clock.clear();
    clear($("moves"), !token ? h("p", {}, "Join a seat to play.") : legal.length === 0 ? h("p", {}, "Nothing to decide now.") :
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
          if (error.code !== "unknown_game") throw error;
          await sleep(150); again = true; continue; // the views projection has not seen it yet
        }
        if (next.version < Math.max(stream.version, played)) { await sleep(80); again = true; continue; }
        if (!view || next.version >= view.version) render(next);
      } while (again);
    } catch (error) { showError($("error"), error); } finally { refreshing = false; }
  };

  const stream = new GameStream(id, {
    token,
    onEvent: (event) => {
      probe.events.push({ version: event.version, type: event.type, at: Date.now() });
      if (view) logEvent(event); else unlogged.push(event);
      refresh();
    },
    onDecision: (decision) => { clock.start(decision.deadline); refresh(); },
    onState: (state) => { $("connection").textContent = state; probe.connection = state; },
    onEnd: () => { refresh(); showResult(id); },
    onRestart: () => { // the log went back: forget what it no longer has
      if (view) view = { ...view, version: 0, legal_commands: [] }; // any view replaces it
      played = 0; unlogged.length = 0;
      clear($("log"));
    },
  });
  probe.stream = stream;
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.ctrlKey || e.metaKey || e.altKey) return;
    const n = Number(e.key);
    if (n >= 1 && n <= 9) $("moves").querySelectorAll("button")[n - 1]?.click();
  });
  stream.open();
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
  clear($("result-body"), h("p", { "data-testid": "winner" }, `Winner: ${result.results.filter((r) => r.won).map((r) => `${r.player} (${r.side})`).join(", ")}`),
    h("table", { class: "data" },
      h("thead", {}, h("tr", {}, ["Place", "Player", "Side", "Total"].map((c) => h("th", {}, c)))),
      h("tbody", {}, result.results.slice().sort((a, b) => a.place - b.place).map((r) => h("tr", { "data-testid": "result-row", "data-seat": r.seat },
        [r.place, r.player, r.side, r.total].map((c) => h("td", {}, c)))))),
    h("p", {}, h("a", { href: `/games/${id}/replay` }, "Watch the replay")));
}

// --- replay --------------------------------------------------------------------------------

async function replayPage() {
  const id = decodeURIComponent(location.pathname.split("/")[2]);
  let end;
  try { end = await get(`/games/${encodeURIComponent(id)}/replay/view`); }
  catch (error) {
    showError($("error"), error);
    if (error.code === "game_not_finished") $("error").append(" ", h("a", { href: `/tables/${id}` }, "Watch it live"));
    return;
  }
  const game = await gameModule(end.view.game);
  const name = (await get("/games")).find((g) => g.name === end.view.game)?.title ?? title(end.view.game);
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
