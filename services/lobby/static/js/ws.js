// A game's live stream over the WebSocket, resumed after a dropped connection from the last
// version received: the server sends every version after it once, so nothing is missed and
// nothing comes twice (and versions already seen are skipped all the same). The resume names
// that version's event too: if a failover took it back (the log went back, 1012
// log_went_back), the stream follows the game again from its start, after onRestart.
// A seat's open socket also carries its moves: command() sends a "command" frame and
// resolves with the "result" frame answering it (or rejects with the "error" frame's ApiError).

import { ApiError } from "./api.js";

// A command id of 32 hex digits (getRandomValues: a page served over plain HTTP has it too).
export const newCommandId = () =>
  Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

export class GameStream {
  constructor(gameId, { token, onEvent, onDecision, onState, onEnd, onRestart }) {
    Object.assign(this, { gameId, token, onEvent, onDecision, onState, onEnd, onRestart });
    this.version = 0;
    this.eventId = null; // the id of the event at `version`
    this.reconnects = 0;
    this.received = []; // every event version as it arrived, repeats included (tests look)
    this.closed = false;
    this.delay = 250;
    this.answers = new Map(); // command_id -> {resolve, reject} of a move sent on the socket
  }

  // Whether a move can go over the socket now (a seat's socket, open).
  get live() { return Boolean(this.token) && this.socket?.readyState === WebSocket.OPEN; }

  command(body) {
    const command_id = body.command_id ?? newCommandId();
    return new Promise((resolve, reject) => {
      this.answers.set(command_id, { resolve, reject });
      this.socket.send(JSON.stringify({ type: "command", command: { ...body, command_id } }));
    });
  }

  answered(item) {
    const waiting = this.answers.get(item.command_id);
    if (!waiting) return;
    this.answers.delete(item.command_id);
    if (item.type === "result") waiting.resolve(item);
    else waiting.reject(new ApiError(item.status, item.code, item.message, item.details));
  }

  open() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams({ after: String(this.version) });
    if (this.eventId) query.set("event", this.eventId);
    if (this.token) query.set("token", this.token);
    const socket = new WebSocket(`${scheme}://${location.host}/games/${encodeURIComponent(this.gameId)}/ws?${query}`);
    this.socket = socket;
    this.onState?.("connecting");
    socket.onopen = () => { this.delay = 250; this.onState?.("live"); };
    socket.onmessage = (message) => this.receive(JSON.parse(message.data));
    socket.onclose = (close) => this.closedWith(socket, close);
  }

  receive(item) {
    if (item.type === "decision") { this.onDecision?.(item); return; }
    if (item.type === "result" || item.type === "error") { this.answered(item); return; }
    this.received.push(item.version);
    if (item.version <= this.version) return; // already seen (never expected)
    this.version = item.version;
    this.eventId = item.event_id;
    this.onEvent?.(item);
  }

  closedWith(socket, close) {
    if (socket !== this.socket || this.closed) return;
    for (const { reject } of this.answers.values()) { // their answers went with the socket
      reject(new ApiError(0, "socket_closed", "the connection dropped; the move may not have been played"));
    }
    this.answers.clear();
    // A socket this client dropped may have had the game's last events on the way: a
    // closing socket's messages are discarded, so its "game_over" is no proof they came.
    // Reconnect from the last version received; the server ends again at once if it was.
    if (close.reason === "game_over" && !socket.dropped) {
      this.closed = true;
      this.onState?.("ended");
      this.onEnd?.();
      return;
    }
    if (close.code >= 4400 && close.code < 4500 && close.code !== 4429) {
      this.closed = true; // refused: a bad token or no such game; retrying would not help
      this.onState?.(`closed: ${close.reason}`);
      return;
    }
    if (close.code === 1012 && close.reason.startsWith("log_went_back")) {
      this.version = 0; // what was received is no longer the game's: all of it again
      this.eventId = null;
      this.onRestart?.();
    }
    this.reconnects += 1;
    this.onState?.("reconnecting");
    setTimeout(() => this.open(), this.delay);
    this.delay = Math.min(this.delay * 2, 5000);
  }

  // Close the socket as a network failure would (tests and the "reconnect" key use it).
  drop() {
    if (!this.socket) return;
    this.socket.dropped = true;
    this.socket.close(4000, "dropped by the client");
  }

  close() { this.closed = true; this.socket?.close(1000, "bye"); }
}
