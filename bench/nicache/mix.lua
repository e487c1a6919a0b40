-- wrk -s mix.lua http://host:port -- <percent> <n>
-- Uniformly random requests for /c<percent>/<i>, i in [0, n); the origin makes /c<p>/<i>
-- cacheable iff i < p*n/100, so a fraction p/100 of the requests is for cacheable URLs.
-- Each wrk thread has its own deterministic random sequence (seeded by its index).
local threads = 0
function setup(thread)
   threads = threads + 1
   thread:set("seed", threads)
end

local percent, n = 0, 1000
function init(args)
   percent = tonumber(args[1]) or percent
   n = tonumber(args[2]) or n
   math.randomseed(seed or 1)
end

function request()
   return wrk.format(nil, "/c" .. percent .. "/" .. math.random(0, n - 1))
end
