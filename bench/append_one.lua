-- wrk script for bench/load.sh: every request POSTs one turn (no ids, no tokens, no anchors:
-- the service assigns, counts and derives, as for most agents) to a conversation drawn at random.
-- The file holds one request per line, "PATH<TAB>BODY"; done() prints the figures as reconstruct.lua does.
--
--   wrk -t2 -c64 -d30s -H 'authorization: Bearer KEY' -s bench/append_one.lua URL -- requests.tsv

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_no", threads)
end

local requests = {}

function init(args)
  local file = args[1]
  if not file then
    error("usage: wrk ... -s append_one.lua URL -- <requests file>")
  end
  -- A headers table replaces wrk's own (Host, and -H's authorization): start from them.
  local headers = { ["content-type"] = "application/json" }
  for k, v in pairs(wrk.headers) do
    headers[k] = v
  end
  for line in io.lines(file) do
    local path, body = line:match("^([^\t]+)\t(.+)$")
    if path then
      requests[#requests + 1] = wrk.format("POST", path, headers, body)
    end
  end
  if #requests == 0 then
    error("no requests in " .. file)
  end
  math.randomseed(os.time() + 7919 * (thread_no or 0))
end

function request()
  return requests[math.random(#requests)]
end

function done(summary, latency, requests_done)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  local figures = {
    { "requests", summary.requests },
    { "seconds", seconds },
    { "rps", summary.requests / seconds },
    { "errors", e.connect + e.read + e.write + e.status + e.timeout },
    { "errors_status", e.status },
    { "p50_ms", latency:percentile(50) / 1000 },
    { "p99_ms", latency:percentile(99) / 1000 },
  }
  for _, kv in ipairs(figures) do
    io.write(string.format("wrk.%s %s\n", kv[1], tostring(kv[2])))
  end
end
