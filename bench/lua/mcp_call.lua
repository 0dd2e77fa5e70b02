-- wrk script for bench/bench_mcp.py and bench/soak.py: stateless MCP tools/call on the 2026-07-28 leg.
--
-- Environment (set by the Python driver):
--   MCP_TOKEN   the bearer token
--   MCP_CALLS   one or more calls separated by "\n", each "<tool>\t<arguments JSON>"; a thread takes them in turn
--               (the soak mixes get_trip and list_trips this way)
--   MCP_EDITS   instead of MCP_CALLS: "tripId,stageId,version;..." one per thread (run wrk with -t = -c): each
--               thread renames its day with edit_stages, passing the version the previous answer gave
-- A call counts as an error unless the HTTP status is 200, the body holds a JSON-RPC "result" and that result is
-- not a tool refusal ("isError": true). done() prints one JSON line "WRKJSON {...}" the driver reads.

local token = os.getenv("MCP_TOKEN") or ""
local headers = {
  ["Authorization"] = "Bearer " .. token,
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = "2026-07-28",
  ["Mcp-Method"] = "tools/call",
}
local META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
             '"io.modelcontextprotocol/clientCapabilities":{}}'

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("index", counter)
  table.insert(threads, thread)
end

local calls = {}
local turn = 0
local edit = nil
local id = 0
errors = 0
last_error = ""

local function body_of(tool, args)
  id = id + 1
  return '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"name":"' .. tool ..
         '","arguments":' .. args .. ',' .. META .. '}}'
end

function init(args)
  local edits = os.getenv("MCP_EDITS")
  if edits and edits ~= "" then
    local n = 0
    for spec in string.gmatch(edits, "[^;]+") do
      n = n + 1
      if n == index then
        local trip, stage, version = string.match(spec, "([^,]+),([^,]+),(%d+)")
        edit = {trip = trip, stage = stage, version = tonumber(version), n = 0}
      end
    end
    if edit == nil then error("MCP_EDITS has no entry for thread " .. index) end
  else
    for line in string.gmatch(os.getenv("MCP_CALLS") or "", "[^\n]+") do
      local tool, arguments = string.match(line, "([^\t]+)\t(.*)")
      table.insert(calls, {tool = tool, args = arguments})
    end
    if #calls == 0 then error("MCP_CALLS is empty") end
    turn = index % #calls
  end
end

function request()
  local tool, args
  if edit then
    edit.n = edit.n + 1
    tool = "edit_stages"
    args = '{"tripId":"' .. edit.trip .. '","action":"update","stageId":"' .. edit.stage .. '","version":' ..
           edit.version .. ',"label":"Day ' .. index .. ' rename ' .. edit.n .. '"}'
  else
    turn = turn % #calls + 1
    tool, args = calls[turn].tool, calls[turn].args
  end
  headers["Mcp-Name"] = tool
  return wrk.format("POST", "/mcp", headers, body_of(tool, args))
end

function response(status, hdrs, body)
  local ok = status == 200 and body ~= nil and string.find(body, '"result"%s*:') ~= nil
             and string.find(body, '"isError"%s*:%s*true') == nil
  if not ok then
    errors = errors + 1
    if last_error == "" then last_error = status .. " " .. string.sub(body or "", 1, 300) end
  end
  if edit and ok then
    local version = string.match(body, '"version"%s*:%s*(%d+)')
    if version then edit.version = tonumber(version) end
  end
end

function done(summary, latency, requests)
  local errs, sample = 0, ""
  for _, thread in ipairs(threads) do
    errs = errs + (thread:get("errors") or 0)
    local e = thread:get("last_error") or ""
    if sample == "" and e ~= "" then sample = e end
  end
  local socket = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  sample = string.gsub(string.gsub(sample, '\\', '\\\\'), '"', '\\"')
  sample = string.gsub(sample, "[%c]", " ")
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"status_errors":%d,' ..
    '"socket_errors":%d,"p50_us":%.1f,"p90_us":%.1f,"p99_us":%.1f,"max_us":%.1f,"sample_error":"%s"}\n',
    summary.requests, summary.duration, errs, summary.errors.status, socket, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency.max, sample))
end
