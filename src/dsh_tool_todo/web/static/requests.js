// A person's requests against the plan: the list of what was asked, as `dsh-todo show` lists it
// (the requests still waiting, then those of the current turn, each with how it stands); and,
// when the server gives a request token (`dsh-todo serve --requests`), buttons per item, a field
// to ask for a new item and one to leave a note. Without a token the list is read-only, and
// hidden while it is empty.
// Every text here (the person's and the model's) is set with textContent, never parsed as HTML.

const STATUS_TEXT = {
  waiting: "waiting",
  pending: "pending",
  honoured: "honoured",
  not_honoured: "not honoured",
  void: "void",
  delivered: "delivered",
  withdrawn: "withdrawn",
};
const KIND_TEXT = { done: "done", reopen: "reopen", remove: "remove", add: "add", note: "note" };
const OPEN = new Set(["waiting", "pending"]);
const POLL_MS = 2000; // while a request is open, its settling shows without a plan frame
const ITEM_ASKS = [
  ["done", (todo) => todo.status !== "completed", (shown) => `ask to mark “${shown}” done`],
  ["reopen", (todo) => todo.status === "completed", (shown) => `ask to reopen “${shown}”`],
  ["remove", () => true, (shown) => `ask to remove “${shown}”`],
];

export class RequestPanel {
  // `given` is the token route's answer (`token` null: read-only); `dom` the page's `el`, `visible`.
  constructor(base, given, dom) {
    this.base = base;
    this.controls = given.token !== null;
    this.headers = { "content-type": "application/json", [given.header]: given.token };
    this.el = dom.el;
    this.visible = dom.visible;
    this.asking = false;
    this.again = false;
    this.timer = 0;
    const el = this.el;
    this.list = el("ol", { className: "requests", attrs: { id: "requests" } });
    this.problem = el("p", { className: "ask-problem", attrs: { id: "ask-problem", role: "alert" } });
    this.problem.hidden = true;
    const help = this.controls
      ? "Ask the agent to change its plan: it is told at its next model call and answers with its next write."
      : "What was asked of the agent: the requests still waiting for it, then those of this turn.";
    this.section = el("section", { className: "request-panel", attrs: { "aria-labelledby": "requests-heading" } }, [
      el("h2", { text: "Requests", attrs: { id: "requests-heading" } }),
      el("p", { className: "help", text: help }),
      this.controls ? this.form("add", "ask-add", "Item to add", "Ask to add") : null,
      this.controls ? this.form("note", "ask-note", "A note for the agent", "Leave note") : null,
      this.problem,
      this.list,
    ]);
    this.list.addEventListener("click", (event) => {
      const button = event.target.closest?.("button[data-withdraw]");
      if (button) this.send(`${this.base}/requests/${encodeURIComponent(button.dataset.withdraw)}/withdraw`, {});
    });
    this.draw({ waiting: [], asked: [] });
  }

  form(kind, id, label, action) {
    const el = this.el;
    const input = el("input", {
      attrs: { type: "text", id: `${id}-text`, maxlength: "300", "aria-label": label, placeholder: label, required: "" },
    });
    const form = el("form", { className: `ask-form ${id}`, attrs: { id } }, [
      input,
      el("button", { text: action, attrs: { type: "submit" } }),
    ]);
    form.addEventListener("submit", async (event) => {
      event.preventDefault(); // the page's CSP allows no form action: the script sends it
      if (await this.send(`${this.base}/requests`, { kind, content: input.value })) input.value = "";
    });
    return form;
  }

  // The buttons beside one plan item: what may be asked of it as it stands (none read-only).
  buttons(todo) {
    if (!this.controls) return null;
    const el = this.el;
    const shown = this.visible(todo.content);
    return el("span", { className: "asks" }, ITEM_ASKS.filter(([, fits]) => fits(todo)).map(([kind, , label]) => {
      const button = el("button", {
        className: `ask ask-${kind}`,
        text: kind,
        attrs: { type: "button", "data-ask": kind, "aria-label": label(shown) },
      });
      button.addEventListener("click", () => this.send(`${this.base}/requests`, { kind, content: todo.content }));
      return button;
    }));
  }

  // POST to the request routes; a refusal is shown as the server worded it. True when accepted.
  async send(url, body) {
    let response;
    let answer;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: this.headers,
        body: JSON.stringify(body),
        mode: "same-origin",
        // Under the page's no-referrer policy the Fetch standard sends a POST's Origin as
        // "null", which the server refuses: a same-origin policy lets the Origin be named.
        referrerPolicy: "same-origin",
      });
      answer = await response.json().catch(() => ({}));
    } catch (error) {
      this.say(`cannot reach the server (${error.message})`);
      return false;
    }
    this.say(response.ok ? "" : answer.error ?? `refused (${response.status})`);
    this.refresh();
    return response.ok;
  }

  say(text) {
    this.problem.textContent = this.visible(text);
    this.problem.hidden = text === "";
  }

  // Asked after each plan frame, each request event the stream tells of, each request sent, and
  // every POLL_MS while one is open (a request filed or withdrawn elsewhere logs no event).
  async refresh() {
    if (!this.section.isConnected) return; // the page stopped, or replaced it: no more asking
    if (this.asking) {
      this.again = true;
      return;
    }
    this.asking = true;
    clearTimeout(this.timer);
    let found = null;
    let final = false; // a 4xx asking again cannot change (a server that reads no requests)
    try {
      const response = await fetch(`${this.base}/requests`, { headers: { accept: "application/json" } });
      if (response.ok) found = await response.json();
      else final = response.status >= 400 && response.status < 500 && ![408, 429].includes(response.status);
    } catch {
      // the plan's own stream says when the server is gone; the next poll asks again
    } finally {
      this.asking = false;
    }
    if (found) this.draw(found);
    if (this.again) {
      this.again = false;
      this.refresh();
    } else if ((!found && !final) || this.open) {
      this.timer = setTimeout(() => this.refresh(), POLL_MS);
    }
  }

  // As `dsh-todo show` lists them: still waiting (oldest first), then the current turn's
  // (`asked`, oldest taken first). One taken while the two were read shows once, as taken.
  draw(found) {
    const taken = new Set(found.asked.map((request) => request.id));
    const rows = [
      ...found.waiting.filter((request) => !taken.has(request.id)).map((request) => ({ ...request, status: "waiting" })),
      ...found.asked,
    ];
    this.open = rows.some((request) => OPEN.has(request.status));
    this.list.replaceChildren(...rows.map((request) => this.row(request)));
    if (rows.length === 0) this.list.append(this.el("li", { className: "empty", text: "No requests yet." }));
    this.section.hidden = !this.controls && rows.length === 0;
  }

  row(request) {
    const el = this.el;
    const status = STATUS_TEXT[request.status] ? request.status : "unknown";
    const kind = KIND_TEXT[request.kind] ? request.kind : "unknown";
    const attrs = { "data-id": request.id, "data-kind": kind, "data-status": status };
    return el("li", { className: `request ${status}`, attrs }, [
      el("span", { className: "kind", text: KIND_TEXT[kind] ?? "unknown" }),
      el("span", { className: "content", text: this.visible(request.content) }),
      el("span", { className: "by", text: `by ${this.visible(request.by)}` }),
      el("span", { className: "status", text: STATUS_TEXT[status] ?? "unknown" }),
      this.controls && OPEN.has(status)
        ? el("button", { className: "withdraw", text: "withdraw", attrs: { type: "button", "data-withdraw": request.id } })
        : null,
    ]);
  }
}
