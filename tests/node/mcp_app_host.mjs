// The host side of an MCP App, for tests/web/browser/test_mcp_app.py: the Apps SDK's own
// AppBridge (bundled with esbuild for the test page) talks to the view in a sandboxed iframe,
// and every resource read or tool call the view makes is relayed, as JSON over HTTP, to the
// test, which passes it to a real `dsh-todo mcp` through the official Python MCP client.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const settings = JSON.parse(document.getElementById("settings").textContent);

async function relay(method, params) {
  const response = await fetch("/relay", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ method, params }),
  });
  const answer = await response.json();
  if (answer.error) throw new Error(answer.error);
  return answer.result;
}

const frame = document.createElement("iframe");
frame.title = "Todo plan";
// Scripts, and nothing else: an opaque origin, no forms, popups or top navigation.
frame.setAttribute("sandbox", "allow-scripts");
frame.style.cssText = "width: 100%; height: 200px; border: 1px solid #d9dadf; border-radius: 8px";
document.getElementById("views").append(frame);

const bridge = new AppBridge(
  null,
  { name: "dsh-tool-todo test host", version: "1" },
  { serverResources: {}, serverTools: {} },
  { hostContext: { theme: settings.theme, displayMode: "inline", platform: "web" } },
);
window.host = { bridge, reads: 0, calls: [], initialized: false, sizes: [] };
bridge.onreadresource = async (params) => {
  window.host.reads += 1;
  return relay("resources/read", params);
};
bridge.oncalltool = async (params) => {
  window.host.calls.push(params);
  return relay("tools/call", params);
};
bridge.onsizechange = ({ height }) => {
  window.host.sizes.push(height);
  if (height) frame.style.height = `${height}px`;
};
bridge.oninitialized = () => {
  window.host.initialized = true;
};
// The model's call, as a host makes it: to the server, then (when `tell`) its result to the view.
window.host.modelCall = async (name, args, tell) => {
  const result = await relay("tools/call", { name, arguments: args });
  if (tell) await bridge.sendToolResult(result);
  return result;
};
// The transport listens before the view can speak: the frame is loaded only then.
await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
frame.src = settings.view;
