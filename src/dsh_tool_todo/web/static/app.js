// The live plan view: the session list, and per session the plan bar and the tool row.
// Model-written text is only ever set with textContent (never parsed as HTML), with controls and
// bidi overrides shown as escapes, so it reads as the literal characters the model sent.

import { RequestPanel } from "./requests.js";

const GLYPHS = { pending: "☐", in_progress: "►", completed: "☑" };
const STATUS_WORDS = { pending: "pending", in_progress: "in progress", completed: "completed" };
const MAX_CALLS = 50;
const PLAN_EVENTS = "todo/write,turn/start";
// C0 and C1 controls, DEL, bidi embeddings, overrides, isolates and marks, the BOM.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
const SHORT = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

const main = document.getElementById("main");
const where = document.getElementById("where");
const connection = document.getElementById("connection");

export function visible(text) {
  return String(text).replace(
    INVISIBLE,
    (char) => SHORT[char] ?? `\\u${char.codePointAt(0).toString(16).padStart(4, "0")}`,
  );
}

function el(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  for (const [key, value] of Object.entries(options.attrs ?? {})) node.setAttribute(key, value);
  for (const child of children) if (child) node.append(child);
  return node;
}

function counts(todos) {
  const result = { pending: 0, in_progress: 0, completed: 0 };
  for (const todo of todos ?? []) result[todo.status] = (result[todo.status] ?? 0) + 1;
  return result;
}

function countsText(todos) {
  const c = counts(todos);
  return `${c.pending} pending · ${c.in_progress} in progress · ${c.completed} completed`;
}

function ago(epochSeconds) {
  const seconds = Math.max(0, Date.now() / 1000 - epochSeconds);
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(epochSeconds * 1000).toLocaleString();
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { accept: "application/json" } });
  const body = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, body?.error ?? `${response.status}`);
  // A 200 whose body was cut (a dropped connection) is no answer: the caller asks again.
  if (body === undefined) throw new HttpError(0, "the answer was cut off");
  return body;
}

// A 4xx other than a timeout or a rate limit says the request cannot succeed as it is:
// asking again would only repeat the answer.
function final(status) {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

// Long text is clipped to a few lines; a clipped piece becomes a button that shows it whole.
// `expanded` holds the texts shown whole, per section, so a redraw keeps them open.
function clampKey(node) {
  return `${node.closest("section")?.className}\n${node.title || node.textContent}`;
}

function clampable(node, expanded) {
  const text = node.textContent;
  const open = expanded.has(clampKey(node));
  if (!open && node.scrollHeight <= node.clientHeight + 1) return;
  node.classList.toggle("expanded", open);
  node.setAttribute("role", "button");
  node.setAttribute("tabindex", "0");
  node.setAttribute("aria-expanded", String(open));
  node.title = text;
}

function toggleClamp(node, expanded) {
  const open = node.getAttribute("aria-expanded") !== "true";
  if (open) expanded.add(clampKey(node));
  else expanded.delete(clampKey(node));
  node.classList.toggle("expanded", open);
  node.setAttribute("aria-expanded", String(open));
}

function setConnection(state, text) {
  connection.dataset.state = state;
  connection.textContent = text;
}

// --- the session list -------------------------------------------------------------

// The shown rows as a tree: each under the session its link names. A parent not among the
// rows becomes a node of its own (said to be unseen, or not in this list), and a session
// whose parents lead back to it is a root marked as such: a hostile log can name any parent.
export function buildTree(rows, unlisted = {}) {
  const byName = new Map();
  for (const row of rows) if (!byName.has(row.name)) byName.set(row.name, { row, children: [] });
  const roots = [];
  const holders = new Map();
  function cycles(node) {
    const seen = new Set([node.row.name]);
    let parent = node.row.parent;
    while (parent != null && byName.has(parent)) {
      if (parent === node.row.name) return true;
      if (seen.has(parent)) return false; // a cycle further up, not through this node
      seen.add(parent);
      parent = byName.get(parent).row.parent;
    }
    return false;
  }
  for (const node of byName.values()) {
    const parent = node.row.parent;
    if (parent == null) roots.push(node);
    else if (byName.has(parent)) {
      if (cycles(node)) {
        node.cycle = true;
        roots.push(node);
      } else byName.get(parent).children.push(node);
    } else {
      let holder = holders.get(parent);
      if (!holder) {
        holder = { row: null, key: parent, visible: unlisted[parent] ?? null, children: [] };
        holders.set(parent, holder);
        roots.push(holder);
      }
      holder.children.push(node);
    }
  }
  return roots;
}

// Only the nodes with a health signal, and the nodes above them (to say where they are).
function withSignals(nodes) {
  const kept = [];
  for (const node of nodes) {
    const children = withSignals(node.children);
    if (children.length > 0 || (node.row?.signals ?? []).length > 0) kept.push({ ...node, children });
  }
  return kept;
}

function sessionList() {
  document.title = "Sessions · dsh-todo";
  where.textContent = "sessions";
  const filter = el("input", {
    attrs: { type: "search", placeholder: "Filter by name", "aria-label": "Filter sessions by name" },
  });
  const onlySignals = el("input", { attrs: { type: "checkbox", id: "only-signals" } });
  const count = el("span", { className: "count" });
  const list = el("ul", { className: "session-list tree", attrs: { id: "session-list" } });
  main.replaceChildren(
    el("section", { className: "sessions" }, [
      el("div", { className: "toolbar" }, [
        filter,
        el("label", { className: "only-signals", attrs: { for: "only-signals" } }, [
          onlySignals,
          document.createTextNode(" only sessions with a health signal"),
        ]),
        count,
      ]),
      list,
    ]),
  );
  // The list is asked for once, then again each time the server's list stream rings (a
  // change to a matching session) and on each (re)connect of that stream: no polling.
  let generation = 0;
  let asking = false;
  let again = false;
  let last = null;
  function draw() {
    const page = last;
    if (!page) return;
    let roots = buildTree(page.sessions, page.unlistedParents ?? {});
    if (onlySignals.checked) roots = withSignals(roots);
    list.replaceChildren(...roots.map((node) => treeNode(node, 0)));
    count.textContent =
      page.total > page.sessions.length
        ? `${page.sessions.length} of ${page.total} sessions (newest first; filter to find others)`
        : `${page.total} session${page.total === 1 ? "" : "s"}`;
    if (page.total === 0 || roots.length === 0) {
      const text = page.total === 0
        ? filter.value ? "No session matches." : "No sessions yet."
        : "No shown session has a health signal.";
      list.replaceChildren(el("li", { className: "empty", text }));
    }
  }
  async function refresh() {
    if (asking) {
      again = true;
      return;
    }
    asking = true;
    const mine = ++generation;
    try {
      const query = new URLSearchParams({ q: filter.value, limit: "200" });
      const page = await getJSON(`/api/sessions?${query}`);
      if (mine !== generation) return;
      last = page;
      draw();
      if (!source || source.readyState === EventSource.OPEN) setConnection("live", "");
    } catch (error) {
      setConnection("down", `cannot reach the server (${error.message})`);
    } finally {
      asking = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }
  let source = null;
  function listen() {
    source?.close();
    source = new EventSource(`/api/sessions/stream?${new URLSearchParams({ q: filter.value })}`);
    source.addEventListener("open", refresh); // whatever changed while it was away
    source.addEventListener("changed", refresh);
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.OPEN) setConnection("down", "reconnecting…");
    });
  }
  // "n s ago" moves on without asking the server.
  setInterval(() => {
    for (const node of list.querySelectorAll(".session .when[data-at]")) {
      node.textContent = ago(Number(node.dataset.at));
    }
  }, 5000);
  let typing = 0;
  filter.addEventListener("input", () => {
    refresh();
    clearTimeout(typing);
    typing = setTimeout(listen, 300);
  });
  onlySignals.addEventListener("change", draw);
  refresh();
  listen();
}

function treeNode(node, depth) {
  const item = node.row === null ? unseenRow(node) : safeSessionRow(node.row, node.cycle);
  item.dataset.depth = String(depth);
  if (node.children.length > 0) {
    item.append(
      el("ul", { className: "children", attrs: { role: "group" } }, node.children.map((child) => treeNode(child, depth + 1))),
    );
  }
  return item;
}

// A parent none of the shown rows is: either this server does not serve it (another
// directory, deleted), or it is only further down the list than the rows shown.
function unseenRow(node) {
  const why = node.visible === false
    ? "parent not visible here"
    : node.visible === true ? "parent not in this list" : "parent not shown";
  const name = node.visible === true
    ? el("a", { className: "name", text: visible(node.key), attrs: { href: sessionHref(node.key) } })
    : el("span", { className: "name", text: visible(node.key) });
  return el("li", { className: "session unseen", attrs: { "data-name": node.key } }, [
    name,
    el("span", { className: "when", text: why }),
  ]);
}

function sessionHref(name) {
  return `/s/${encodeURIComponent(name)}`;
}

// One row the page cannot draw (a name no address can carry) is shown as it is, not linked,
// and never takes the rest of the list with it.
function safeSessionRow(row, cycle = false) {
  try {
    return sessionRow(row, cycle);
  } catch {
    return el("li", { className: "session unaddressable" }, [
      el("span", { className: "name", text: visible(String(row?.owner ?? row?.name)) }),
      el("span", { className: "when", text: "cannot be opened here" }),
    ]);
  }
}

const SIGNAL_WORDS = {
  dropped: "dropped items",
  bulk_completed: "many completed at once",
  all_done_at_once: "all done at once",
  stuck: "stuck",
  unchanged: "unchanged rewrite",
  not_honoured: "asked, not done",
};

function signalsNode(signals) {
  if (!signals || signals.length === 0) return null;
  const text = signals.map((signal) => `${SIGNAL_WORDS[signal.kind] ?? visible(signal.kind)} (#${signal.seq})`);
  // atLeast: a run older than the writes the server reads; its count is a lower bound
  const bound = (signal) => (signal.atLeast ? ` (in progress for at least ${signal.count} writes)` : "");
  const title = signals
    .map((signal) => `${visible(signal.kind)} at seq ${signal.seq}${bound(signal)}: ${signal.items.map((i) => `"${visible(i)}"`).join(", ")}`)
    .join("\n");
  return el("span", { className: "signals", text: `⚠ ${text.join(" · ")}`, attrs: { title } });
}

// How a delegated run ended (its session/end): "ended: finished", or "ended: failed" with the
// reason its wrapper recorded.
function endNode(end) {
  if (end === null) return null;
  const reason = end.error == null ? "" : `: ${visible(end.error)}`;
  return el("span", { className: "end", text: `ended: ${visible(end.outcome)}${reason}` });
}

function sessionRow(row, cycle = false) {
  const link = el("a", {
    className: "name",
    text: visible(row.owner ?? row.name),
    attrs: { href: sessionHref(row.name), title: `${visible(row.name)}.jsonl` },
  });
  const when = el("span", { className: "when", text: ago(row.lastActivity), attrs: { "data-at": String(row.lastActivity) } });
  when.title = new Date(row.lastActivity * 1000).toLocaleString();
  const progress = row.progress;
  let figures;
  let bar = null;
  if (progress === null) figures = "unreadable log";
  else if (progress.cleared) figures = "no plan";
  else {
    figures = `${progress.completed}/${progress.total}` + (progress.inProgress ? ` · ${progress.inProgress} active` : "");
    bar = el("progress", { attrs: { max: String(Math.max(progress.total, 1)), value: String(progress.completed) } });
  }
  const signals = row.signals ?? [];
  const end = row.end ?? null;
  const ended = end === null ? "" : ` ended${end.outcome === "failed" ? " failed" : ""}`;
  return el("li", {
    className: `session${signals.length ? " has-signals" : ""}${cycle ? " cycle" : ""}${ended}`,
    attrs: { "data-name": row.name },
  }, [
    link,
    when,
    el("span", { className: "progress" }, [bar, el("span", { className: "figures", text: figures })]),
    endNode(end),
    row.workingOn == null ? null : el("span", { className: "now", text: `now: ${visible(row.workingOn)}` }),
    signalsNode(signals),
    cycle ? el("span", { className: "cycle-note", text: `its link to ${visible(row.parent)} makes a cycle` }) : null,
  ]);
}

// The session page's parent and sub-agents, as links (asked for on each (re)connect).
async function showFamily(base, into) {
  let family;
  try {
    family = await getJSON(`${base}/family`);
  } catch {
    return; // the plan's own stream says what is wrong with the session
  }
  const parts = [];
  if (family.parent != null) {
    parts.push(el("span", { className: "label", text: "Parent: " }));
    parts.push(
      family.parentVisible
        ? el("a", { className: "parent", text: visible(family.parent), attrs: { href: sessionHref(family.parent), id: "family-parent" } })
        : el("span", { className: "parent unseen", text: `${visible(family.parent)} (not visible here)`, attrs: { id: "family-parent" } }),
    );
  }
  if (family.children.length > 0) {
    parts.push(el("span", { className: "label", text: " Sub-agents: " }));
    parts.push(
      el("ul", { className: "children", attrs: { id: "family-children" } },
        family.children.map((child) => el("li", {}, [el("a", { text: visible(child), attrs: { href: sessionHref(child) } })]))),
    );
    if (!family.childrenComplete) parts.push(el("span", { className: "count", text: " (of the newest sessions only)" }));
  }
  into.replaceChildren(...parts);
  into.hidden = parts.length === 0;
}

// A server started with --requests gives a request token, and the request panel
// (requests.js) has its controls; without one (`{"token": null}`) it only lists what was asked,
// read-only. Every server lists it: the module is loaded with the page, not on demand.
async function requestPanel(base) {
  let given;
  try {
    given = await getJSON("/api/requests/token");
  } catch {
    return null; // a server from before the request channel: no panel
  }
  if (typeof given.header !== "string") return null;
  if (typeof given.token !== "string") given = { header: given.header, token: null };
  return new RequestPanel(base, given, { el, visible });
}

// --- one session ------------------------------------------------------------------

function sessionPage(name) {
  const base = `/api/sessions/${encodeURIComponent(name)}`;
  const view = {
    bar: el("progress", { attrs: { id: "plan-progress", max: "1", value: "0" } }),
    figures: el("span", { className: "figures", attrs: { id: "plan-figures" } }),
    now: el("div", { className: "now", attrs: { id: "plan-now" } }),
    items: el("ol", { className: "items", attrs: { id: "plan-items" } }),
    empty: el("p", { className: "empty", attrs: { id: "plan-empty" } }),
    calls: el("ol", { className: "calls", attrs: { id: "calls" } }),
    family: el("nav", { className: "family", attrs: { id: "family", "aria-label": "Linked sessions" } }),
  };
  view.family.hidden = true;
  main.replaceChildren(
    view.family,
    el("section", { className: "plan", attrs: { "aria-labelledby": "plan-heading" } }, [
      el("h2", { text: "Plan", attrs: { id: "plan-heading" } }),
      el("div", { className: "bar" }, [view.bar, view.figures]),
      view.now,
      view.empty,
      view.items,
    ]),
    el("section", { className: "tool-row", attrs: { "aria-labelledby": "calls-heading" } }, [
      el("h2", { text: "todo_write calls this turn", attrs: { id: "calls-heading" } }),
      el("p", {
        className: "help",
        text:
          `The calls recorded since the turn started, newest first (at most ${MAX_CALLS}), ` +
          "each with what it changed. A refused call appends nothing to the log, so it is not shown.",
      }),
      view.calls,
    ]),
  );

  const state = {
    plan: null,
    cause: null,
    calls: new Map(),
    generation: 0,
    lastId: null,
    frames: [],
    loaded: false, // until the first snapshot, there is nothing to say about the plan
    stopped: false,
    expanded: new Set(),
  };
  let requests = null; // the request panel, once the token route answered
  requestPanel(base).then((panel) => {
    if (panel === null || state.stopped) return;
    requests = panel;
    main.querySelector("section.plan").after(panel.section);
    render();
    panel.refresh();
  });

  function title(shown) {
    document.title = `${shown} · dsh-todo`;
    where.textContent = shown;
  }

  // A state no retry can leave: the page says why, in place of the plan, and stops asking.
  function stop(heading, reason, status) {
    state.stopped = true;
    state.generation++;
    if (!where.textContent) title(visible(name));
    source?.close();
    setConnection("down", status);
    main.replaceChildren(
      el("section", { className: "problem", attrs: { id: "problem", role: "alert" } }, [
        el("h2", { text: heading }),
        el("p", { className: "reason", text: reason }),
        el("p", {}, [el("a", { text: "All sessions", attrs: { href: "/" } })]),
      ]),
    );
  }

  function unknown(message) {
    title(visible(name));
    stop("No such session", `There is no session named “${visible(name)}” here.`, message);
  }

  function unreadable(reason) {
    stop("This session's log cannot be read", reason, "stopped: reload the page to try again");
  }

  function refused(error) {
    if (error.status === 404) unknown(error.message);
    else unreadable(error.message);
  }

  main.addEventListener("click", (event) => {
    const node = event.target.closest?.(".content[aria-expanded]");
    if (node) toggleClamp(node, state.expanded);
  });
  main.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" && event.key !== " ") return;
    const node = event.target.closest?.(".content[aria-expanded]");
    if (!node) return;
    event.preventDefault(); // a space would scroll the page
    toggleClamp(node, state.expanded);
  });

  function render() {
    if (state.stopped) return;
    const plan = state.plan;
    const c = counts(plan);
    const total = plan ? plan.length : 0;
    view.bar.max = Math.max(total, 1);
    view.bar.value = c.completed;
    view.figures.textContent = plan ? `${c.completed}/${total} completed` : "";
    view.now.replaceChildren(
      ...(plan ?? [])
        .filter((todo) => todo.status === "in_progress")
        .map((todo) => el("p", { className: "active" }, [
          el("span", { className: "label", text: "Now: " }),
          el("span", { className: "content", text: visible(todo.content) }),
        ])),
    );
    view.items.replaceChildren(
      ...(plan ?? []).map((todo) =>
        el("li", { className: `item ${todo.status}`, attrs: { "data-status": todo.status } }, [
          el("span", { className: "glyph", text: GLYPHS[todo.status] ?? "?", attrs: { "aria-label": STATUS_WORDS[todo.status] ?? "" } }),
          el("span", { className: "content", text: visible(todo.content) }),
          requests?.buttons(todo),
        ])),
    );
    view.empty.textContent = !state.loaded
      ? "Loading…"
      : plan === null
        ? state.cause === "turn/start"
          ? "The plan was cleared: a new turn started and has written no plan yet."
          : "No plan has been recorded in this session yet."
        : plan.length === 0
          ? "The plan is empty (the last call wrote no todos)."
          : "";
    view.empty.hidden = view.empty.textContent === "";
    const calls = [...state.calls.values()].sort((a, b) => b.seq - a.seq).slice(0, MAX_CALLS);
    view.calls.replaceChildren(...calls.map(callRow));
    if (calls.length === 0) {
      const text = state.loaded ? "No todo_write call in this turn yet." : "Loading…";
      view.calls.append(el("li", { className: "empty", text }));
    }
    for (const node of main.querySelectorAll(".item .content, .change .content")) {
      clampable(node, state.expanded);
    }
    main.dataset.frames = state.frames.join(" ");
  }

  function addCall(seq, todos, previous) {
    state.calls.set(seq, { seq, todos, previous: previous ?? [] });
    if (state.calls.size > MAX_CALLS) {
      const oldest = Math.min(...state.calls.keys());
      state.calls.delete(oldest);
    }
  }

  // A filtered page reads a bounded stretch of the log, so it may come back short with a
  // cursor: ask on from there until the calls are found, a turn starts, or the log begins.
  async function planEvents(before, limit, stale) {
    const events = [];
    let owner = null;
    let next = before;
    for (;;) {
      const query = new URLSearchParams({ before: String(next), limit: String(limit - events.length), types: PLAN_EVENTS });
      const page = await getJSON(`${base}/events?${query}`);
      events.unshift(...page.events);
      owner = page.owner;
      const turnFound = page.events.some((event) => event.type === "turn/start");
      if (!page.more || events.length >= limit || turnFound || stale()) return { events, more: page.more, owner };
      next = page.cursor ?? page.events[0].seq;
    }
  }

  async function loadTurn(upTo) {
    const mine = state.generation;
    const page = await planEvents(upTo + 1, MAX_CALLS + 1, () => mine !== state.generation);
    title(visible(page.owner ?? name));
    if (mine !== state.generation) return; // a newer snapshot or a turn start came first
    let start = 0;
    for (let i = page.events.length - 1; i >= 0; i--) {
      if (page.events[i].type === "turn/start") { start = i + 1; break; }
    }
    let previous = null;
    if (start === 0 && page.more && page.events.length > 0) {
      previous = page.events[0].data.todos; // only the list the oldest shown call replaced
      start = 1;
    }
    for (const event of page.events.slice(start)) {
      addCall(event.seq, event.data.todos, previous);
      previous = event.data.todos;
    }
    render();
    if (source?.readyState === EventSource.OPEN) setConnection("live", "live");
  }

  function loadTurnUntilDone(upTo) {
    const mine = state.generation;
    loadTurn(upTo).catch((error) => {
      if (mine !== state.generation) return;
      if (final(error.status)) {
        refused(error);
        return;
      }
      setConnection("down", `history: ${error.message}; retrying…`);
      setTimeout(() => {
        if (mine === state.generation) loadTurnUntilDone(upTo); // else a newer snapshot loads
      }, 1000);
    });
  }

  function onFrame(message) {
    const frame = JSON.parse(message.data);
    // the frame's id: its seq and its plan's mark, so a resume on a replaced log is caught
    state.lastId = message.lastEventId || String(frame.seq);
    state.frames.push(frame.seq);
    if (state.frames.length > 500) state.frames.shift();
    state.loaded = true;
    if (frame.cause === "snapshot") {
      state.generation++;
      state.plan = frame.plan;
      state.cause = frame.decidedBy ? frame.decidedBy.type : null;
      state.calls.clear();
      loadTurnUntilDone(frame.seq);
    } else if (frame.cause === "turn/start") {
      state.generation++;
      state.plan = null;
      state.cause = "turn/start";
      state.calls.clear();
    } else {
      addCall(frame.seq, frame.plan, state.plan);
      state.plan = frame.plan;
      state.cause = frame.cause;
    }
    render();
    requests?.refresh(); // a write or a new turn may settle a request
  }

  let source = null;
  function open() {
    if (state.stopped) return;
    const query = state.lastId === null ? "" : `&after=${encodeURIComponent(state.lastId)}`;
    source = new EventSource(`${base}/stream?requests=1${query}`);
    source.addEventListener("projection", onFrame);
    source.addEventListener("requests", () => requests?.refresh()); // taken, withdrawn, told
    source.addEventListener("open", () => {
      setConnection("live", "live");
      showFamily(base, view.family);
    });
    source.addEventListener("fatal", (message) => {
      // The log cannot be read any further: reconnecting would meet the same error.
      unreadable(JSON.parse(message.data).error);
    });
    source.addEventListener("error", () => {
      if (state.stopped) return;
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (an error status): ask the server why. An answer no retry can
        // change (no such session, a broken log) is shown and ends the page's asking; else
        // reopen, resuming after the last frame.
        setConnection("down", "disconnected; retrying…");
        getJSON(`${base}/projection`)
          .then(() => setTimeout(open, 1000))
          .catch((error) => (final(error.status) ? refused(error) : setTimeout(open, 1000)));
      } else {
        setConnection("down", "reconnecting…");
      }
    });
  }
  render();
  open();
}

function callRow(call) {
  const before = new Map(call.previous.map((todo) => [todo.content, todo.status]));
  const after = new Map(call.todos.map((todo) => [todo.content, todo.status]));
  const changes = [];
  for (const todo of call.todos) {
    if (!before.has(todo.content)) {
      changes.push(change("added", "+", todo.content, STATUS_WORDS[todo.status]));
    } else if (before.get(todo.content) !== todo.status) {
      const was = STATUS_WORDS[before.get(todo.content)];
      const note = `${was} → ${STATUS_WORDS[todo.status]}`;
      changes.push(change(`status to-${todo.status}`, GLYPHS[todo.status], todo.content, note));
    }
  }
  for (const todo of call.previous) {
    if (!after.has(todo.content)) changes.push(change("removed", "−", todo.content, "removed"));
  }
  if (changes.length === 0) changes.push(el("li", { className: "same", text: "no change to the list" }));
  return el("li", { className: "call", attrs: { "data-seq": String(call.seq) } }, [
    el("div", { className: "call-head" }, [
      el("span", { className: "seq", text: `#${call.seq}` }),
      el("span", { className: "counts", text: countsText(call.todos) }),
    ]),
    el("ul", { className: "changes" }, changes),
  ]);
}

function change(kind, mark, content, note) {
  return el("li", { className: `change ${kind}` }, [
    el("span", { className: "mark", text: mark, attrs: { "aria-hidden": "true" } }),
    el("span", { className: "content", text: visible(content) }),
    el("span", { className: "note", text: note }),
  ]);
}

function sessionName(path) {
  try {
    return decodeURIComponent(path.slice(3));
  } catch {
    return path.slice(3); // a malformed escape: show the name as written (the server has no such)
  }
}

const path = location.pathname;
if (path.startsWith("/s/")) sessionPage(sessionName(path));
else sessionList();
