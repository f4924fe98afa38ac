// Reads a session stream in its AG-UI form with @ag-ui/client, the way an AG-UI app does.
//
//   node read_ag_ui_stream.mjs URL COUNT [get|post] [HEADERS_JSON]
//
// `get`: an HttpAgent whose requestInit() asks with GET (the stream is GET-only); `post`: the
// unmodified HttpAgent, which POSTs a RunAgentInput. Every state change the agent applies
// prints one JSON line {state, messages, threadId}; after COUNT of them the run is aborted and
// the script prints {"done": ...} with the events it saw. A failed run prints {"error", "status"}.
import { HttpAgent } from "@ag-ui/client";

const [url, count, mode = "get", headersJson = "{}"] = process.argv.slice(2);
const headers = JSON.parse(headersJson);

class GetHttpAgent extends HttpAgent {
  requestInit() {
    return {
      method: "GET",
      headers: { ...this.headers, Accept: "text/event-stream" },
      signal: this.abortController.signal,
    };
  }
}

const Agent = mode === "post" ? HttpAgent : GetHttpAgent;
const agent = new Agent({ url, headers, threadId: "client-side-thread" });
const seen = [];
let changes = 0;
const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");

try {
  await agent.runAgent(
    {},
    {
      onEvent({ event }) {
        seen.push(event.type);
      },
      onRunStartedEvent({ event }) {
        print({ runStarted: { threadId: event.threadId, runId: event.runId } });
      },
      onRunErrorEvent({ event }) {
        print({ runError: { message: event.message, code: event.code } });
      },
      onStateChanged({ state, messages }) {
        changes += 1;
        print({ state, messages });
        if (changes >= Number(count)) agent.abortRun();
      },
    },
  );
  print({ done: seen });
} catch (error) {
  print({ error: String(error?.message ?? error), status: error?.status ?? null, seen });
}
