/* Proctor run report: builds the sample browser from JSON embedded in this page.
   Nothing is fetched. Model text only ever reaches the DOM through textContent. */
(function () {
  "use strict";
  var PAGE_SIZE = 50;
  var LONG_TEXT = 6000;
  var LIMIT_REACH = 2;

  function readJson(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var key in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, key) || attrs[key] === null || attrs[key] === undefined) continue;
        if (key === "text") node.textContent = String(attrs[key]);
        else if (key === "cls") node.className = attrs[key];
        else node.setAttribute(key, attrs[key]);
      }
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  /* A table cell's text that wraps only at spaces: each word with punctuation in it (where a
     browser may break, as after "-" or "/") is held together by a nowrap span. */
  var BREAKABLE_WORD = /[^\s]*[^\w\s][^\s]*/g;
  function cellText(value) {
    var text = value === null || value === undefined ? "" : String(value);
    var frag = document.createDocumentFragment(), last = 0, match;
    BREAKABLE_WORD.lastIndex = 0;
    while ((match = BREAKABLE_WORD.exec(text)) !== null) {
      if (match.index > last) frag.appendChild(document.createTextNode(text.slice(last, match.index)));
      frag.appendChild(el("span", { cls: "nw", text: match[0] }));
      last = BREAKABLE_WORD.lastIndex;
    }
    if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
    return frag;
  }

  function fmtTokens(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(2).replace(/\.?0+$/, "") + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
    return String(n);
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined) return "";
    return s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(s < 10 ? 2 : 1) + " s";
  }

  /* ---------- a small Python highlighter (regex tokenizer, DOM output) ---------- */
  var PY_KEYWORDS = {};
  ("False None True and as assert async await break class continue def del elif else except finally for " +
   "from global if import in is lambda nonlocal not or pass raise return try while with yield match case")
    .split(" ").forEach(function (w) { PY_KEYWORDS[w] = true; });
  var PY_BUILTINS = {};
  ("abs all any bin bool bytes callable chr dict divmod enumerate filter float format frozenset getattr " +
   "hasattr hash hex int isinstance issubclass iter len list map max min next object oct open ord pow print " +
   "range repr reversed round set setattr slice sorted str sum super tuple type zip self")
    .split(" ").forEach(function (w) { PY_BUILTINS[w] = true; });
  var PY_TOKEN = new RegExp([
    "(#[^\\n]*)",                                                        // 1 comment
    "((?:[rRbBuUfF]{1,2})?(?:\"\"\"[\\s\\S]*?(?:\"\"\"|$)|'''[\\s\\S]*?(?:'''|$)|" +
      "\"(?:\\\\.|[^\"\\\\\\n])*\"?|'(?:\\\\.|[^'\\\\\\n])*'?))",         // 2 string
    "(@[A-Za-z_][\\w.]*)",                                               // 3 decorator
    "(\\b(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|\\d[\\d_]*\\.?[\\d_]*(?:[eE][+-]?\\d+)?[jJ]?)\\b" +
      "|\\.\\d+(?:[eE][+-]?\\d+)?)",                                      // 4 number
    "([A-Za-z_]\\w*)"                                                    // 5 name
  ].join("|"), "g");

  function highlightPython(code) {
    var frag = document.createDocumentFragment();
    var last = 0, match, previousName = "";
    PY_TOKEN.lastIndex = 0;
    while ((match = PY_TOKEN.exec(code)) !== null) {
      if (match[0] === "") { PY_TOKEN.lastIndex++; continue; }
      if (match.index > last) frag.appendChild(document.createTextNode(code.slice(last, match.index)));
      var cls = null, word = match[0];
      if (match[1]) cls = "tok-comment";
      else if (match[2]) cls = "tok-string";
      else if (match[3]) cls = "tok-decorator";
      else if (match[4]) cls = "tok-number";
      else if (match[5]) {
        if (PY_KEYWORDS[word]) cls = "tok-keyword";
        else if (previousName === "def" || previousName === "class") cls = "tok-defname";
        else if (PY_BUILTINS[word]) cls = "tok-builtin";
        previousName = word;
      }
      frag.appendChild(cls ? el("span", { cls: cls, text: word }) : document.createTextNode(word));
      last = PY_TOKEN.lastIndex;
    }
    if (last < code.length) frag.appendChild(document.createTextNode(code.slice(last)));
    return frag;
  }

  function codeBlock(code, language) {
    var pre = el("pre", { cls: "code" });
    var inner = el("code", { cls: "language-" + (language || "text") });
    if (language === "python") inner.appendChild(highlightPython(code));
    else inner.textContent = code;
    pre.appendChild(inner);
    return pre;
  }

  /* Long outputs show their head first; the rest is one click away. */
  function textBlock(content, cls) {
    var pre = el("pre", { cls: cls || "text" });
    content = content === null || content === undefined ? "" : String(content);
    if (content.length <= LONG_TEXT) {
      pre.textContent = content;
      return pre;
    }
    pre.textContent = content.slice(0, LONG_TEXT);
    var wrap = el("div", null, pre);
    var more = el("button", { cls: "more", type: "button",
      text: "show all " + content.length.toLocaleString() + " characters" });
    more.addEventListener("click", function () { pre.textContent = content; more.remove(); });
    wrap.appendChild(more);
    return wrap;
  }

  /* ---------- mathematics: LaTeX in prose, rendered by the inlined KaTeX ---------- */
  /* Model and task text is untrusted: KaTeX gets no trust (\href, \url, \includegraphics and
     \html... render as inert red names), bounded macro expansion and sizes, and shows a
     formula it cannot parse as its source instead of throwing. */
  var KATEX_OPTIONS = { throwOnError: false, trust: false, strict: "ignore", maxExpand: 1000, maxSize: 10,
    output: "htmlAndMathml" };
  var CODE_SPAN = /(`+)[\s\S]*?[^`]\1(?!`)/y;

  /* The page carries KaTeX as inert text (id katex-script) so that opening the page never
     compiles it; the first formula shown runs it once, from the page itself. */
  var katexStarted = false;
  function katexReady() {
    if (!katexStarted) {
      katexStarted = true;
      var source = document.getElementById("katex-script");
      if (source && !window.katex) {
        var run = document.createElement("script");
        run.textContent = source.textContent;
        document.head.appendChild(run);  // an inline script runs as it is inserted
        run.remove();
      }
    }
    return Boolean(window.katex && typeof window.katex.render === "function");
  }

  /* Where the "$" at i closes, or -1. Pandoc's rule, so that prices stay prose: a non-space
     follows the opening "$"; the first unescaped "$" after it closes only when a non-space
     precedes it and no digit follows, and never across a blank line. "$5 and $10" is text. */
  function inlineDollarClose(text, i) {
    if (i + 1 >= text.length || /\s/.test(text.charAt(i + 1))) return -1;
    for (var j = i + 1; j < text.length; j++) {
      var ch = text.charAt(j);
      if (ch === "\\") { j++; continue; }
      if (ch === "\n" && /^\n[ \t\r]*\n/.test(text.slice(j, j + 64))) return -1;
      if (ch === "$") return /\s/.test(text.charAt(j - 1)) || /[0-9]/.test(text.charAt(j + 1)) ? -1 : j;
    }
    return -1;
  }

  /* A code span's content when it is one formula and nothing else, or null. Datasets wrap
     math in backticks (FrontierScience-Olympiad's "`\(P\)`"): such a span is that formula; any
     other span (`x**2`, `$5`, code) stays code. */
  function wholeFormula(inner) {
    var trimmed = inner.trim();
    if (!trimmed || trimmed.indexOf("`") >= 0) return null;
    var parts = mathSegments(trimmed);  // no backtick inside: no deeper call
    return parts.length === 1 && parts[0].tex !== undefined ? parts[0] : null;
  }

  /* Prose split into text and formulas: $...$, $$...$$, \(...\) and \[...\]. An escaped
     character (\$) and code in backticks are text, unless the whole span is one formula. */
  function mathSegments(text) {
    var parts = [], plain = 0, i = 0, n = text.length;
    // A closer not found once is not found later either: hostile text full of openers stays linear.
    var unclosed = {};
    function formula(start, end, tex, display) {
      if (start > plain) parts.push({ text: text.slice(plain, start) });
      parts.push({ tex: tex, display: display, source: text.slice(start, end) });
      plain = end;
      return end;
    }
    while (i < n) {
      var c = text.charAt(i), end;
      if (c === "`") {
        CODE_SPAN.lastIndex = i;
        if (CODE_SPAN.test(text)) {
          var spanEnd = CODE_SPAN.lastIndex, ticks = 0;
          while (text.charAt(i + ticks) === "`") ticks++;
          var whole = wholeFormula(text.slice(i + ticks, spanEnd - ticks));
          i = whole ? formula(i, spanEnd, whole.tex, whole.display) : spanEnd;
          continue;
        }
        while (text.charAt(i) === "`") i++;
      } else if (c === "\\") {
        var d = text.charAt(i + 1);
        if ((d === "(" || d === "[") && !unclosed[d]) {
          end = text.indexOf(d === "(" ? "\\)" : "\\]", i + 2);
          if (end < 0) unclosed[d] = true;
          if (end > 0 && text.slice(i + 2, end).trim()) { i = formula(i, end + 2, text.slice(i + 2, end), d === "["); continue; }
        }
        i += 2;
      } else if (c === "$" && text.charAt(i + 1) === "$") {
        end = unclosed.$$ ? -1 : text.indexOf("$$", i + 2);
        if (end < 0) unclosed.$$ = true;
        if (end > 0 && text.slice(i + 2, end).trim()) { i = formula(i, end + 2, text.slice(i + 2, end), true); continue; }
        i += 2;
      } else if (c === "$") {
        end = inlineDollarClose(text, i);
        if (end > 0) { i = formula(i, end + 1, text.slice(i + 1, end), false); continue; }
        i++;
      } else {
        i++;
      }
    }
    if (plain < n) parts.push({ text: text.slice(plain) });
    // A displayed formula is a block of its own: the line breaks around it would add blank lines.
    parts.forEach(function (part, k) {
      if (part.text === undefined) return;
      if (k > 0 && parts[k - 1].display) part.text = part.text.replace(/^[ \t]*\r?\n/, "");
      if (k + 1 < parts.length && parts[k + 1].display) part.text = part.text.replace(/\r?\n[ \t]*$/, "");
    });
    return parts;
  }

  function renderFormula(part) {
    var holder = el(part.display ? "div" : "span", { cls: "math " + (part.display ? "display" : "inline") });
    try {
      window.katex.render(part.tex, holder, Object.assign({ displayMode: part.display }, KATEX_OPTIONS));
    } catch (err) {
      holder.className += " math-failed";
      holder.textContent = part.source;
    }
    return holder;
  }

  /* A reference answer is often bare LaTeX ("\\sqrt{2 g L \\sin\\theta}", PHYBench's form): one
     line with a command, a script or a brace, and no delimiters, is shown as one formula. */
  var BARE_TEX = /^[^\n$]*(?:\\[A-Za-z]+|[\^_{])[^\n$]*$/;

  /* Prose that holds LaTeX: rendered, with its source one click away. Long prose renders its
     head first, as textBlock shows it. Prose without a formula, or a page without KaTeX, is
     plain text exactly as before. */
  function proseBlock(content, cls, bareFormula) {
    content = content === null || content === undefined ? "" : String(content);
    var source = textBlock(content, cls);
    if (!katexReady()) return source;
    var parts = mathSegments(content);
    if (bareFormula && parts.length === 1 && parts[0].text !== undefined && BARE_TEX.test(content.trim())) {
      parts = [{ tex: content.trim(), display: true, source: content }];
    }
    if (!parts.some(function (part) { return part.tex !== undefined; })) return source;
    var view = el("div", { cls: "math-view" });
    var rendered = el("div", { cls: "rendered" }, view);
    var next = 0, shown = 0;
    function renderUpTo(limit) {
      while (next < parts.length && shown < limit) {
        var part = parts[next];
        if (part.text !== undefined && shown + part.text.length > limit) {
          parts.splice(next + 1, 0, { text: part.text.slice(limit - shown) });
          part = { text: part.text.slice(0, limit - shown) };
        }
        view.appendChild(part.text !== undefined ? document.createTextNode(part.text) : renderFormula(part));
        shown += (part.text !== undefined ? part.text : part.source).length;
        next++;
      }
    }
    renderUpTo(LONG_TEXT);
    if (next < parts.length) {
      var more = el("button", { cls: "more", type: "button",
        text: "show all " + content.length.toLocaleString() + " characters" });
      more.addEventListener("click", function () { renderUpTo(Infinity); more.remove(); });
      rendered.appendChild(more);
    }
    source.hidden = true;
    var toggle = el("button", { cls: "latex-toggle", type: "button", "aria-pressed": "false",
      title: "show this text as written", text: "LaTeX source" });
    toggle.addEventListener("click", function () {
      var showSource = source.hidden;
      source.hidden = !showSource;
      rendered.hidden = showSource;
      toggle.textContent = showSource ? "rendered" : "LaTeX source";
      toggle.title = showSource ? "show the mathematics rendered" : "show this text as written";
      toggle.setAttribute("aria-pressed", String(showSource));
    });
    return el("div", { cls: "prose-block" }, toggle, rendered, source);
  }

  function messageText(content) {
    if (content === null || content === undefined) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content.map(function (part) {
        if (typeof part === "string") return part;
        if (part && typeof part.text === "string") return part.text;
        return JSON.stringify(part);
      }).join("\n");
    }
    return JSON.stringify(content, null, 2);
  }

  /* A lookup keyed by record text: "constructor" or "__proto__" must not reach Object's own members. */
  function ownValue(table, key) {
    return typeof key === "string" && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : null;
  }

  function badge(text, cls) { return el("span", { cls: "badge " + (cls || ""), text: text }); }

  function execSummary(exec) {
    if (!exec) return null;
    var parts = [];
    if (exec.exit_code !== null && exec.exit_code !== undefined) parts.push("exit " + exec.exit_code);
    if (exec.timed_out) parts.push("timed out");
    if (exec.oom_killed) parts.push("out of memory");
    if (exec.duration_s !== undefined) parts.push(fmtSeconds(exec.duration_s));
    if (exec.backend) parts.push(exec.backend);
    return parts.join(" · ");
  }

  /* ---------- one sample's detail, built only when it is opened ---------- */
  function tokenChart(rec, meta) {
    var turns = rec.turns || [];
    // One-turn, tool-free samples (judged tracks) gain nothing from a budget chart.
    if (turns.length < 2 && rec.forced_submission_turn === null) return null;
    var W = 420, H = 150, L = 48, R = 10, T = 10, B = 24;
    var maxTurn = Math.max(1, turns[turns.length - 1].turn);
    var dataMax = turns[turns.length - 1].cumulative_tokens;
    /* Scaled to this sample: a limit line shows only within LIMIT_REACH of its tokens (and only
       where the run has a token budget at all); otherwise the curve would hug the axis. */
    var limits = !meta.agentic ? [] : [[meta.force_submit_at, "limit-force", "force submit "],
      [meta.token_cap, "limit-cap", "cap "]].filter(function (line) {
        return dataMax > 0 && line[0] <= LIMIT_REACH * dataMax;
      });
    var maxTok = Math.max.apply(null, [dataMax, 1].concat(limits.map(function (l) { return l[0]; }))) * 1.06;
    function sx(v) { return L + (v / maxTurn) * (W - L - R); }
    function sy(v) { return H - B - (v / maxTok) * (H - T - B); }
    var ns = "http://www.w3.org/2000/svg";
    function s(tag, attrs) {
      var node = document.createElementNS(ns, tag);
      for (var k in attrs) node.setAttribute(k, attrs[k]);
      return node;
    }
    var svg = s("svg", { "class": "plot mini-tokens", viewBox: "0 0 " + W + " " + H, width: W, height: H,
      role: "img", "aria-label": "cumulative tokens per turn" });
    var points = ["" + sx(0) + "," + sy(0)];
    turns.forEach(function (t) { points.push(sx(t.turn).toFixed(1) + "," + sy(t.cumulative_tokens).toFixed(1)); });
    limits.forEach(function (line) {
        var y = sy(line[0]).toFixed(1);
        svg.appendChild(s("line", { "class": "limit " + line[1], x1: L, x2: W - R, y1: y, y2: y }));
        var label = s("text", { "class": "limit-label " + line[1], x: W - R - 2, y: y - 3, "text-anchor": "end" });
        label.textContent = line[2] + fmtTokens(line[0]);
        svg.appendChild(label);
      });
    svg.appendChild(s("polyline", { "class": "curve o-" + rec.outcome, points: points.join(" ") }));
    turns.forEach(function (t) {
      var dot = s("circle", { "class": t.forced_submission ? "dot forced" : "dot", cx: sx(t.turn).toFixed(1),
        cy: sy(t.cumulative_tokens).toFixed(1), r: t.forced_submission ? 4 : 2 });
      var title = s("title", {});
      title.textContent = "turn " + t.turn + ": " + t.cumulative_tokens.toLocaleString() + " tokens" +
        (t.estimated ? " (estimated)" : "") + (t.forced_submission ? " · submission forced" : "");
      dot.appendChild(title);
      svg.appendChild(dot);
    });
    var axis = s("text", { "class": "tick", x: 4, y: T + 8 });
    axis.textContent = fmtTokens(Math.round(maxTok));
    svg.appendChild(axis);
    var xlab = s("text", { "class": "tick", x: W - R, y: H - 6, "text-anchor": "end" });
    xlab.textContent = "turn " + maxTurn;
    svg.appendChild(xlab);
    return svg;
  }

  function forcedMarker(turn, notice) {
    var marker = el("div", { cls: "forced-marker", role: "note" },
      el("div", { text: "Submission forced at turn " + turn + ": the token budget passed the force-submit " +
        "threshold, so this request named submit_answer." }));
    if (notice) marker.appendChild(el("div", { cls: "notice", text: "Notice sent to the model: " + notice }));
    return marker;
  }

  function renderToolCall(call, recordById) {
    var fn = call["function"] || {};
    var name = fn.name || call.name || "(unnamed tool)";
    var record = recordById[call.id] || null;
    var box = el("div", { cls: "tool-call" },
      el("div", { cls: "tool-head" }, badge(name, "tool"), record && record.error ? badge("malformed call", "warn") : null));
    var args = fn.arguments !== undefined ? fn.arguments : (record ? record.raw_arguments : "");
    var parsed = null;
    try { parsed = typeof args === "string" ? JSON.parse(args) : args; } catch (e) { parsed = null; }
    if (parsed && typeof parsed === "object" && typeof parsed.code === "string") {
      box.appendChild(codeBlock(parsed.code, "python"));
    } else {
      box.appendChild(textBlock(typeof args === "string" ? args : JSON.stringify(args, null, 2), "text args"));
    }
    if (record && record.error) box.appendChild(el("div", { cls: "error-text", text: record.error }));
    return box;
  }

  function renderToolResult(msg, recordById) {
    var record = recordById[msg.tool_call_id] || null;
    if (!record && (msg.name || msg.duration_s || msg.truncated)) {
      record = { name: msg.name || "tool", duration_s: msg.duration_s, truncated: msg.truncated, error: msg.error };
    }
    var head = el("div", { cls: "msg-head" }, el("span", { cls: "role", text: "tool result" }));
    if (record) {
      head.appendChild(badge(record.name, "tool"));
      if (record.duration_s) head.appendChild(badge(fmtSeconds(record.duration_s), "dim"));
      var sb = record.sandbox || {};
      if (sb.exit_code !== undefined && sb.exit_code !== null) head.appendChild(badge("exit " + sb.exit_code, sb.exit_code ? "warn" : "dim"));
      if (sb.timed_out) head.appendChild(badge("timed out", "bad"));
      if (sb.oom_killed) head.appendChild(badge("out of memory", "bad"));
      if (record.truncated || sb.stdout_truncated || sb.stderr_truncated) head.appendChild(badge("output truncated", "trunc"));
    }
    var box = el("div", { cls: "msg tool" + (record && record.truncated ? " truncated" : "") }, head,
      textBlock(messageText(msg.content), "text output"));
    if (record && record.truncated) {
      box.appendChild(el("div", { cls: "trunc-note", text: "Truncated: the model saw only this much of the output." }));
    }
    return box;
  }

  var USER_KINDS = { prompt: "prompt", nudge: "harness nudge", forced_submission: "forced submission",
    status: "harness usage report", help: "harness help" };

  function renderTranscript(rec) {
    var wrap = el("div", { cls: "transcript" });
    var recordById = {};
    (rec.tool_calls || []).forEach(function (c) { recordById[c.call_id] = c; });
    var forcedTurn = rec.forced_submission_turn;
    var hasForced = forcedTurn !== null && forcedTurn !== undefined;
    var assistantIndex = 0, forcedShown = false;
    (rec.transcript || []).forEach(function (msg) {
      var role = msg.role || "?";
      if (role === "assistant") {
        // The FrontierMath loop stores each reply's usage on the message; else pair replies with turns in order.
        var usage = msg.usage || (rec.turns || [])[assistantIndex] || null;
        assistantIndex++;
        var turnNo = msg.turn || (usage ? usage.turn : assistantIndex);
        var forced = Boolean(msg.forced_submission || (usage && usage.forced_submission) ||
          (hasForced && turnNo === forcedTurn));
        if (forced && !forcedShown) {
          wrap.appendChild(forcedMarker(hasForced ? forcedTurn : turnNo, null));
          forcedShown = true;
        }
        var head = el("div", { cls: "msg-head" }, el("span", { cls: "role", text: "assistant" }),
          badge("turn " + turnNo, "dim"), forced ? badge("forced: submit_answer", "warn") : null);
        if (usage) {
          head.appendChild(badge("+" + fmtTokens(usage.input_tokens) + " in / " + fmtTokens(usage.output_tokens) +
            " out · " + fmtTokens(usage.cumulative_tokens) + " total" + (usage.estimated ? " (est.)" : ""), "dim"));
        }
        if (msg.finish_reason && msg.finish_reason !== "stop" && msg.finish_reason !== "tool_calls") {
          head.appendChild(badge("finish: " + msg.finish_reason, "warn"));
        }
        var box = el("div", { cls: "msg assistant" }, head);
        var reasoning = msg.reasoning_content || msg.reasoning;
        if (reasoning) {
          box.appendChild(el("details", { cls: "reasoning" }, el("summary", { text: "reasoning" }),
            proseBlock(messageText(reasoning), "text")));
        }
        var text = messageText(msg.content);
        if (text) box.appendChild(proseBlock(text, "text prose"));
        (msg.tool_calls || []).forEach(function (call) { box.appendChild(renderToolCall(call, recordById)); });
        wrap.appendChild(box);
      } else if (role === "tool") {
        wrap.appendChild(renderToolResult(msg, recordById));
      } else if (msg.kind === "forced_submission") {
        // The harness's own notice: shown as the marker, with the words the model read.
        // A profile that keeps forcing sends a notice before every forced turn: each names its own.
        var noticeTurn = msg.turn !== null && msg.turn !== undefined ? msg.turn : forcedTurn;
        wrap.appendChild(forcedMarker(noticeTurn, messageText(msg.content)));
        forcedShown = true;
      } else {
        var content = proseBlock(messageText(msg.content), "text prose");
        if (role === "system") {
          wrap.appendChild(el("details", { cls: "msg system" }, el("summary", { text: "system prompt" }), content));
        } else {
          var label = ownValue(USER_KINDS, msg.kind) || role;
          wrap.appendChild(el("div", { cls: "msg " + role + (msg.kind ? " kind-" + msg.kind : "") },
            el("div", { cls: "msg-head" }, el("span", { cls: "role", text: label })), content));
        }
      }
    });
    if (!forcedShown && hasForced) wrap.appendChild(forcedMarker(forcedTurn, null));
    return wrap;
  }

  function field(label, value, cls) {
    if (value === null || value === undefined || value === "") return null;
    return el("div", { cls: "field" }, el("span", { cls: "label", text: label }),
      el("span", { cls: "value " + (cls || ""), text: String(value) }));
  }

  function renderSubmission(sub) {
    var box = el("section", { cls: "panel submission" }, el("h4", { text: "Submitted answer()" }),
      codeBlock(sub.code || "", "python"));
    (sub.check_problems || []).forEach(function (p) { box.appendChild(el("div", { cls: "error-text", text: "check: " + p })); });
    box.appendChild(el("div", { cls: "fields" },
      field("turn", sub.turn), field("value type", sub.value_type), field("value", sub.value_repr, "mono"),
      field("verification", sub.verification), field("answer() run", execSummary(sub.answer_exec)),
      field("verify run", execSummary(sub.verify_exec))));
    [["answer() stderr", sub.answer_exec], ["verify stderr", sub.verify_exec]].forEach(function (pair) {
      if (pair[1] && pair[1].stderr) box.appendChild(el("div", null, el("div", { cls: "label", text: pair[0] }),
        textBlock(pair[1].stderr, "text output")));
    });
    return box;
  }

  var REFERENCE_TITLES = { answer: "Reference answer", rubric: "Grading rubric",
    verify: "verify() source (checks the submitted value)", expected: "Expected value (compared by type)" };

  function renderReference(ref) {
    var box = el("section", { cls: "panel reference" },
      el("h4", { text: ownValue(REFERENCE_TITLES, ref.kind) || ("Reference (" + ref.kind + ")") }));
    if (ref.kind === "verify" || ref.kind === "expected") box.appendChild(codeBlock(ref.text || "", "python"));
    else box.appendChild(proseBlock(ref.text, "text prose reference-text", ref.kind === "answer"));
    if (ref.tolerance !== null && ref.tolerance !== undefined) {
      box.appendChild(el("div", { cls: "fields" }, field("tolerance", ref.tolerance, "mono")));
    }
    return box;
  }

  function renderJudgePrompt(judge) {
    var note = "prompt sent to the judge (the same on every attempt)";
    if (judge.prompt_chars !== null && judge.prompt_chars !== undefined) {
      note += " · " + judge.prompt_chars.toLocaleString() + " characters" +
        (judge.prompt_chars > judge.prompt.length ? ", stored capped: head and tail kept" : ", stored whole");
    }
    var details = el("details", { cls: "judge-prompt" }, el("summary", { text: note }));
    if (judge.prompt_sha256) details.appendChild(el("div", { cls: "mono muted", text: "sha256 " + judge.prompt_sha256 }));
    details.appendChild(proseBlock(judge.prompt, "text prose"));
    return details;
  }

  function renderJudge(judge) {
    var box = el("section", { cls: "panel judge" }, el("h4", { text: "Judge" }),
      el("div", { cls: "fields" }, field("decided by", judge.decided_by), field("judge model", judge.model),
        field("verdict", judge.verdict, "strong"), field("points", judge.points),
        field("pre-check", judge.precheck),
        field("judge tokens", judge.input_tokens || judge.output_tokens
          ? judge.input_tokens + " in / " + judge.output_tokens + " out" : null),
        field("parse error", judge.parse_error, "bad")));
    if (!(judge.replies || []).length && judge.decided_by === "precheck") {
      box.appendChild(el("div", { cls: "muted", text: "Settled by the deterministic pre-check; the judge was not asked." }));
    }
    if (typeof judge.prompt === "string") box.appendChild(renderJudgePrompt(judge));
    (judge.replies || []).forEach(function (reply, i) {
      box.appendChild(el("div", { cls: "label", text: "reply " + (i + 1) + " of " + judge.replies.length }));
      box.appendChild(proseBlock(reply, "text prose"));
    });
    return box;
  }

  /* The answer imitates the judge prompt's own separators or labels: flag it with the lines. */
  function renderSectionMimicry(matches) {
    var box = el("div", { cls: "banner warn section-mimicry", role: "note" },
      el("div", { text: "The answer imitates the judge prompt's sections (answer_mimics_prompt_sections): " +
        "the judge saw these lines verbatim inside its prompt." }));
    matches.forEach(function (m) {
      box.appendChild(el("div", { cls: "mono", text: m.marker + "  ←  " + m.text }));
    });
    return box;
  }

  function renderEed(eed) {
    return el("section", { cls: "panel eed" }, el("h4", { text: "EED score" }),
      el("div", { cls: "fields" }, field("score", eed.score, "strong"), field("status", eed.status),
        field("relative distance", eed.relative_distance), field("distance", eed.distance),
        field("reference size", eed.reference_size), field("answer size", eed.answer_size),
        field("extracted answer", eed.extracted_answer, "mono")));
  }

  function buildDetail(index, meta) {
    var rec = readJson("sample-" + index);
    var detail = el("div", { cls: "detail", "data-sample": index });
    var facts = el("div", { cls: "fields" },
      field("task", rec.task_id, "mono"), field("trial", rec.trial), field("model", rec.model),
      field("subject", rec.subject), field("effort", rec.reasoning_effort),
      field("outcome", rec.outcome, "o-text-" + rec.outcome), field("score", rec.score),
      field("tokens", rec.total_tokens.toLocaleString() + (rec.tokens_estimated ? " (estimated)" : "") +
        " (in " + rec.input_tokens.toLocaleString() + ", out " + rec.output_tokens.toLocaleString() +
        ", reasoning " + rec.reasoning_tokens.toLocaleString() + ")"),
      field("forced submission turn", rec.forced_submission_turn),
      field("token cap reached", rec.cap_reached ? "yes" : null, "bad"),
      field("retries", rec.retries || null), field("judge retries", rec.judge_retries || null),
      field("duration", fmtSeconds(rec.duration_s)),
      field("sandbox image", rec.sandbox_image, "mono"));
    detail.appendChild(facts);
    if (rec.error) detail.appendChild(el("div", { cls: "error-text", text: rec.error }));
    if (rec.answer_mimics_prompt_sections) detail.appendChild(renderSectionMimicry(rec.prompt_section_matches || []));
    var chart = tokenChart(rec, meta);
    if (chart) detail.appendChild(chart);
    var panels = el("div", { cls: "panels" });
    if (rec.reference) panels.appendChild(renderReference(rec.reference));
    if (rec.submission) panels.appendChild(renderSubmission(rec.submission));
    if (rec.judge) panels.appendChild(renderJudge(rec.judge));
    if (rec.eed) panels.appendChild(renderEed(rec.eed));
    if (panels.childNodes.length) detail.appendChild(panels);
    detail.appendChild(el("h4", { text: "Transcript (" + (rec.transcript || []).length + " messages)" }));
    detail.appendChild(renderTranscript(rec));
    return detail;
  }

  /* ---------- the sample list: filters, search, pagination ---------- */
  function init() {
    var meta = readJson("report-meta");
    var index = readJson("sample-index") || [];
    var list = document.getElementById("sample-rows");
    var status = document.getElementById("sample-status");
    var pager = document.getElementById("sample-pager");
    var controls = {
      outcome: document.getElementById("filter-outcome"),
      subject: document.getElementById("filter-subject"),
      model: document.getElementById("filter-model"),
      task: document.getElementById("filter-task"),
      search: document.getElementById("filter-search")
    };
    var state = { page: 0, open: {}, rows: index, sortKey: null, sortDir: 1 };
    var searchCache = {};

    function haystack(i) {
      if (!(i in searchCache)) {
        var node = document.getElementById("sample-" + i);
        searchCache[i] = node ? node.textContent.toLowerCase() : "";
      }
      return searchCache[i];
    }
    /* The embedded JSON escapes "<" as \u003c, so the query is escaped the same way before matching. */
    function jsonForm(query) {
      return JSON.stringify(query).slice(1, -1).replace(/</g, "\\u003c").toLowerCase();
    }

    function applyFilters() {
      var outcome = controls.outcome.value, subject = controls.subject.value;
      var model = controls.model ? controls.model.value : "";
      var task = controls.task.value.trim().toLowerCase();
      var query = controls.search.value.trim();
      var needle = query ? jsonForm(query) : "";
      state.rows = index.filter(function (row) {
        if (outcome && row.outcome !== outcome) return false;
        if (subject && (row.subject || "") !== subject) return false;
        if (model && row.model !== model) return false;
        if (task && row.task.toLowerCase().indexOf(task) < 0) return false;
        if (needle && haystack(row.i).indexOf(needle) < 0) return false;
        return true;
      });
      sortRows();
      state.page = 0;
      render();
    }

    /* Missing values (no forced turn, no subject) sort last in either direction. */
    function sortRows() {
      var key = state.sortKey, dir = state.sortDir;
      if (!key) return;
      state.rows = state.rows.slice().sort(function (a, b) {
        var x = a[key], y = b[key];
        var xMissing = x === null || x === undefined || x === "", yMissing = y === null || y === undefined || y === "";
        if (xMissing || yMissing) return xMissing === yMissing ? a.i - b.i : (xMissing ? 1 : -1);
        if (x < y) return -dir;
        if (x > y) return dir;
        return a.i - b.i;
      });
    }

    Array.prototype.forEach.call(document.querySelectorAll("table.samples th.sortable"), function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key");
        state.sortDir = state.sortKey === key ? -state.sortDir : (th.classList.contains("num") ? -1 : 1);
        state.sortKey = key;
        Array.prototype.forEach.call(document.querySelectorAll("table.samples th.sortable"), function (other) {
          other.removeAttribute("aria-sort");
        });
        th.setAttribute("aria-sort", state.sortDir === 1 ? "ascending" : "descending");
        sortRows();
        state.page = 0;
        render();
      });
    });

    function toggle(row, tr) {
      var next = tr.nextSibling;
      if (next && next.classList && next.classList.contains("detail-row")) {
        next.remove();
        delete state.open[row.i];
        tr.classList.remove("open");
        return;
      }
      var cell = el("td", { colspan: "10" });
      try {
        cell.appendChild(buildDetail(row.i, meta));
      } catch (err) {
        cell.appendChild(el("div", { cls: "error-text", text: "could not show this sample: " + err }));
      }
      tr.parentNode.insertBefore(el("tr", { cls: "detail-row" }, cell), tr.nextSibling);
      tr.classList.add("open");
      state.open[row.i] = true;
    }

    function render() {
      var rows = state.rows;
      var pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      state.page = Math.min(state.page, pages - 1);
      var start = state.page * PAGE_SIZE;
      var frag = document.createDocumentFragment();
      rows.slice(start, start + PAGE_SIZE).forEach(function (row) {
        var tr = el("tr", { cls: "sample-row", id: "row-" + row.i, tabindex: "0" },
          el("td", { cls: "mono" }, cellText(row.task)), el("td", { text: row.trial }),
          el("td", null, cellText(row.model)), el("td", null, cellText(row.subject)),
          el("td", null, el("span", { cls: "outcome o-" + row.outcome, text: row.outcome.replace(/_/g, " ") })),
          el("td", { cls: "num", text: row.score }),
          el("td", { cls: "num", text: fmtTokens(row.tokens) }), el("td", { cls: "num", text: row.turns }),
          el("td", { cls: "nw", text: row.forced !== null ? "turn " + row.forced : "" }),
          el("td", { cls: "num", text: fmtSeconds(row.duration) }));
        tr.addEventListener("click", function () { toggle(row, tr); });
        tr.addEventListener("keydown", function (ev) { if (ev.key === "Enter") toggle(row, tr); });
        frag.appendChild(tr);
        if (state.open[row.i]) {
          delete state.open[row.i];
          var holder = document.createElement("tbody");
          holder.appendChild(tr);
          toggle(row, tr);
          while (holder.firstChild) frag.appendChild(holder.firstChild);
        }
      });
      list.textContent = "";
      list.appendChild(frag);
      status.textContent = rows.length === index.length
        ? index.length + " samples"
        : rows.length + " of " + index.length + " samples match";
      pager.textContent = "";
      if (pages > 1) {
        var prev = el("button", { type: "button", text: "‹ previous" });
        var next = el("button", { type: "button", text: "next ›" });
        prev.disabled = state.page === 0;
        next.disabled = state.page >= pages - 1;
        prev.addEventListener("click", function () { state.page--; render(); });
        next.addEventListener("click", function () { state.page++; render(); });
        pager.appendChild(prev);
        pager.appendChild(el("span", { text: " page " + (state.page + 1) + " of " + pages + " " }));
        pager.appendChild(next);
      }
    }

    function openSample(i) {
      controls.outcome.value = ""; controls.subject.value = ""; controls.task.value = "";
      controls.search.value = "";
      if (controls.model) controls.model.value = "";
      state.rows = index;
      sortRows();
      var position = -1;
      for (var k = 0; k < state.rows.length; k++) if (state.rows[k].i === i) { position = k; break; }
      if (position < 0) return;
      state.page = Math.floor(position / PAGE_SIZE);
      state.open[i] = true;
      render();
      var tr = document.getElementById("row-" + i);
      if (tr) tr.scrollIntoView({ block: "start" });
    }

    var timer = null;
    function debounced() { clearTimeout(timer); timer = setTimeout(applyFilters, 150); }
    controls.outcome.addEventListener("change", applyFilters);
    controls.subject.addEventListener("change", applyFilters);
    if (controls.model) controls.model.addEventListener("change", applyFilters);
    controls.task.addEventListener("input", debounced);
    controls.search.addEventListener("input", debounced);

    /* Clicking a line in the token plot opens that sample. */
    var curves = document.querySelector(".plot-tokens .curves");
    if (curves) {
      curves.addEventListener("click", function (ev) {
        var target = ev.target.closest ? ev.target.closest("[data-sample]") : null;
        if (target) openSample(Number(target.getAttribute("data-sample")));
      });
    }
    /* A cell of a trials x task grid opens its sample. */
    Array.prototype.forEach.call(document.querySelectorAll("table.grid"), function (grid) {
      grid.addEventListener("click", function (ev) {
        var target = ev.target.closest ? ev.target.closest("[data-sample]") : null;
        if (target) openSample(Number(target.getAttribute("data-sample")));
      });
    });
    var hash = /^#sample-(\d+)$/.exec(window.location.hash);
    render();
    if (hash) openSample(Number(hash[1]));
    var report = { ready: true, readyAt: performance.now(), paintedAt: null, open: openSample,
      samples: index.length };
    window.__proctorReport = report;
    document.body.setAttribute("data-ready", "1");
    /* The first frame after the list is built: what "the page has opened" means to a reader. */
    requestAnimationFrame(function () { setTimeout(function () { report.paintedAt = performance.now(); }, 0); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
