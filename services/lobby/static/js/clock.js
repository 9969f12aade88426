// The turn clock: counts down to a decision's deadline, once a second.

export class TurnClock {
  constructor(element) { this.element = element; this.timer = null; }

  start(deadline) {
    this.stop();
    const end = new Date(deadline).getTime();
    const tick = () => {
      const left = Math.max(0, Math.round((end - Date.now()) / 1000));
      const minutes = Math.floor(left / 60), seconds = String(left % 60).padStart(2, "0");
      this.element.textContent = `${minutes}:${seconds}`;
      this.element.setAttribute("aria-label", `${left} seconds left`);
      if (left === 0) this.stop();
    };
    tick();
    this.timer = setInterval(tick, 1000);
  }

  stop() { clearInterval(this.timer); this.timer = null; }

  clear() { this.stop(); this.element.textContent = ""; }
}
