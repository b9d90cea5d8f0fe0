-- nagle-sim: explain's findings as Wireshark fields.
--
-- `nagle-sim explain CAPTURE --annotate OUT.pcapng` writes the capture back with a packet
-- comment on each stall's first frame (the last one before the quiet gap) and on the
-- frame that released it. Each comment holds a sentence for people and one line for this
-- script, "nagle-sim: key=value; key=value; ..." (values escaped with %XX for ';', '%'
-- and newlines). This post-dissector reads those lines from frame.comment and adds:
--
--   nagle_sim.stall        the stall's number in its connection
--   nagle_sim.conn         the connection's number in explain's list
--   nagle_sim.role         "start" (the last frame before the gap) or "release"
--   nagle_sim.cause        on the releasing frame: each cause ("nagle", "delayed_ack")
--                          and the whole ("nagle+delayed_ack"), so either filter works
--   nagle_sim.stall_ms     the stall's length in milliseconds
--   nagle_sim.side         the endpoint to change ("client" or "server")
--   nagle_sim.waiting      the endpoint that was kept waiting
--   nagle_sim.fix          the first fix, in the runtime explain was given
--   nagle_sim.confidence   0.3, 0.6, 0.9 (1.0 when the kernel's own record decided)
--   nagle_sim.alternative  another reading the wire leaves open
--   nagle_sim.start_frame / nagle_sim.end_frame   links between the two frames
--   nagle_sim.text         the sentence
--
-- with an expert-info entry (Sequence group: a warning on the release, a note on the
-- start). Use:  tshark -X lua_script:nagle_sim.lua -r OUT.pcapng -Y 'nagle_sim.cause == "nagle"'
-- or install it with `nagle-sim wireshark --install` (Wireshark's personal Lua plugins
-- folder). Written for Wireshark 3.6 and later (tested with 4.0).

local proto = Proto("nagle_sim", "nagle-sim explain")

local fields = {
    stall = ProtoField.uint32("nagle_sim.stall", "Stall"),
    conn = ProtoField.uint32("nagle_sim.conn", "Connection"),
    role = ProtoField.string("nagle_sim.role", "Role"),
    cause = ProtoField.string("nagle_sim.cause", "Cause"),
    stall_ms = ProtoField.double("nagle_sim.stall_ms", "Stall (ms)"),
    side = ProtoField.string("nagle_sim.side", "Endpoint to change"),
    waiting = ProtoField.string("nagle_sim.waiting", "Endpoint kept waiting"),
    fix = ProtoField.string("nagle_sim.fix", "Fix"),
    confidence = ProtoField.double("nagle_sim.confidence", "Confidence"),
    alternative = ProtoField.string("nagle_sim.alternative", "Alternative reading"),
    start_frame = ProtoField.framenum("nagle_sim.start_frame", "Stall starts after frame"),
    end_frame = ProtoField.framenum("nagle_sim.end_frame", "Stall released by frame"),
    text = ProtoField.string("nagle_sim.text", "Explanation"),
}
proto.fields = {fields.stall, fields.conn, fields.role, fields.cause, fields.stall_ms,
                fields.side, fields.waiting, fields.fix, fields.confidence,
                fields.alternative, fields.start_frame, fields.end_frame, fields.text}

local expert_release = ProtoExpert.new("nagle_sim.release", "nagle-sim: a stall ends here",
                                       expert.group.SEQUENCE, expert.severity.WARN)
local expert_start = ProtoExpert.new("nagle_sim.start", "nagle-sim: a stall starts after this frame",
                                     expert.group.SEQUENCE, expert.severity.NOTE)
proto.experts = {expert_release, expert_start}

local comment_field = Field.new("frame.comment")

local function unescape(value)
    return (value:gsub("%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

local function parse(line)
    local found = {}
    for part in line:gmatch("[^;]+") do
        local key, value = part:match("^%s*([%w_]+)=(.*)$")
        if key then
            found[key] = unescape(value)
        end
    end
    return found
end

local function add_stall(tree, tvb, kv)
    local ms = tonumber(kv.stall_ms) or 0
    local title = string.format("nagle-sim: stall %s, %.1f ms, %s (%s)", kv.stall or "?", ms,
                                kv.cause or "?", kv.role or "?")
    local sub = tree:add(proto, tvb(0, 0), title)
    if tonumber(kv.stall) then sub:add(fields.stall, tonumber(kv.stall)) end
    if tonumber(kv.conn) then sub:add(fields.conn, tonumber(kv.conn)) end
    sub:add(fields.role, kv.role or "")
    if kv.role == "release" and kv.cause then
        -- the whole cause, then each part: `== "nagle"` and `== "nagle+delayed_ack"` match
        sub:add(fields.cause, kv.cause)
        if kv.cause:find("+", 1, true) then
            for part in kv.cause:gmatch("[^+]+") do
                sub:add(fields.cause, part)
            end
        end
    end
    sub:add(fields.stall_ms, ms)
    if kv.side then sub:add(fields.side, kv.side) end
    if kv.waiting then sub:add(fields.waiting, kv.waiting) end
    if kv.fix then sub:add(fields.fix, kv.fix) end
    if tonumber(kv.confidence) then sub:add(fields.confidence, tonumber(kv.confidence)) end
    if kv.alternative then sub:add(fields.alternative, kv.alternative) end
    if tonumber(kv.start_frame) then sub:add(fields.start_frame, tonumber(kv.start_frame)) end
    if tonumber(kv.end_frame) then sub:add(fields.end_frame, tonumber(kv.end_frame)) end
    if kv.text then sub:add(fields.text, kv.text) end
    if kv.role == "release" then
        sub:add_proto_expert_info(expert_release, string.format(
            "nagle-sim: %.1f ms stall, %s (confidence %s)%s", ms, kv.cause or "?",
            kv.confidence or "?", kv.fix and ("; fix: " .. kv.fix) or ""))
    else
        sub:add_proto_expert_info(expert_start, string.format(
            "nagle-sim: a %.1f ms stall (%s) follows this frame", ms, kv.cause or "?"))
    end
end

function proto.dissector(tvb, pinfo, tree)
    local comments = { comment_field() }
    for _, comment in ipairs(comments) do
        local text = comment.value
        if type(text) == "string" then
            for line in text:gmatch("[^\n]+") do
                if line:sub(1, 10) == "nagle-sim:" then
                    add_stall(tree, tvb, parse(line:sub(11)))
                end
            end
        end
    end
end

register_postdissector(proto)
