// Reads a lead session's AG-UI stream with its sub-agents (?format=ag-ui&tree=1) with
// @ag-ui/client, the way an AG-UI app does.
//
//   node read_ag_ui_tree.mjs URL
//
// runAgent runs every event through the client's own verifyEvents (a sub-agent started
// twice, a run id used again, a finish without a start, RUN_FINISHED while a sub-agent is
// active: each fails the run) before applying it. Prints one JSON line per sub-agent event
// ({"subagent": event}) and per change of the messages ({"messages": [...]}, the activities
// with their subagentRunId). A line "stop" on stdin aborts the run; the script then prints
// {"done": [every event type seen, in order]}. A failed run prints {"error", "seen"}.
import { HttpAgent } from "@ag-ui/client";
import { createInterface } from "node:readline";

const [url] = process.argv.slice(2);

class GetHttpAgent extends HttpAgent {
  requestInit() {
    return {
      method: "GET",
      headers: { ...this.headers, Accept: "text/event-stream" },
      signal: this.abortController.signal,
    };
  }
}

const agent = new GetHttpAgent({ url, threadId: "client-side-thread" });
const seen = [];
const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "stop") agent.abortRun();
});

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
      onSubagentStartedEvent({ event }) {
        print({ subagent: event });
      },
      onSubagentFinishedEvent({ event }) {
        print({ subagent: event });
      },
      onSubagentErrorEvent({ event }) {
        print({ subagent: event });
      },
      onRunErrorEvent({ event }) {
        print({ runError: { message: event.message, code: event.code } });
      },
      onMessagesChanged({ messages }) {
        print({ messages });
      },
    },
  );
  print({ done: seen });
} catch (error) {
  print({ error: String(error?.message ?? error), seen });
}
process.exit(0);
