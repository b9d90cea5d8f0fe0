// The teacher's page of `nagle-sim serve`: fills the page from the teacher socket and sends
// the teacher's commands. Everything from the server (and so from students: nicknames)
// goes into the page with textContent, never as HTML. The page's key is in its own
// address; the socket and the result files need it.
"use strict";

(function () {
  const key = new URLSearchParams(window.location.search).get("key") || "";
  const PHASE_WORDS = {
    vote: "Vote: everyone answers alone",
    show: "Vote 1 of the class (no answer yet)",
    discuss: "Discuss with your neighbours",
    revote: "Re-vote: everyone answers again",
    reveal: "The answer, and both votes",
    play: "The answer; every ladder plays on",
  };
  let lessons = [];
  let joinLink = "";
  let joinQr = "";
  let state = null;
  let socket = null;
  let retry = 500;

  function $(id) { return document.getElementById(id); }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function send(command) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(command));
    }
  }

  function banner(text) {
    const node = $("banner");
    node.textContent = text || "";
    node.hidden = !text;
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(scheme + "//" + window.location.host + "/teacher/ws?key=" +
      encodeURIComponent(key));
    socket.addEventListener("open", function () { retry = 500; banner(""); });
    socket.addEventListener("message", function (event) {
      let message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      if (message.t === "hello") { hello(message); }
      else if (message.t === "state") { state = message; render(); }
      else if (message.t === "error") { banner("Not done: " + message.why); }
    });
    socket.addEventListener("close", function (event) {
      banner("The connection to the class server is lost" +
        (event.reason ? " (" + event.reason + ")" : "") + "; trying again…");
      window.setTimeout(connect, retry);
      retry = Math.min(retry * 2, 5000);
    });
  }

  function hello(message) {
    lessons = message.lessons || [];
    joinLink = message.classLink || "";
    joinQr = message.qr || "";
    $("class-link").textContent = joinLink;
    if (joinQr) { $("qr").src = joinQr; } else { $("qr").hidden = true; }
    const select = $("lesson");
    const keep = select.value;
    select.textContent = "";
    lessons.forEach(function (lesson) {
      const option = el("option", "", lesson.title);
      option.value = lesson.slug;
      select.appendChild(option);
    });
    if (keep) { select.value = keep; }
    renderQuestions();
  }

  function lessonOf(slug) {
    return lessons.find(function (lesson) { return lesson.slug === slug; });
  }

  function renderQuestions() {
    const box = $("questions");
    box.textContent = "";
    const lesson = lessonOf($("lesson").value);
    if (!lesson) { return; }
    lesson.questions.forEach(function (question, index) {
      const button = el("button", "", "Question " + (index + 1));
      button.type = "button";
      button.title = question.prompt;
      button.dataset.question = String(index);
      if (state && state.poll && state.poll.lesson === lesson.slug &&
          state.poll.question === index) { button.classList.add("on"); }
      button.addEventListener("click", function () {
        send({ do: "ask", lesson: lesson.slug, question: index });
      });
      box.appendChild(button);
    });
    if (!lesson.questions.length) { box.appendChild(el("span", "", "(no questions)")); }
  }

  function lessonLabel(slug) {
    const lesson = lessonOf(slug);
    if (!lesson) { return slug; }
    const number = /^(\d+)\./.exec(lesson.title);
    return number ? "L" + number[1] : lesson.title;
  }

  // where a student is, short enough for the roster: "L7 · 28/202", "L7 · question"
  function where(student) {
    const parts = [];
    if (student.lesson) { parts.push(lessonLabel(student.lesson)); }
    if (student.screen === "question") { parts.push("question"); }
    else if (student.screen === "sandbox") { parts.push("sandbox"); }
    else if (student.screen === "list") { parts.push("lesson list"); }
    else if (student.step) { parts.push(student.step + "/" + (student.steps || "?")); }
    return parts.join(" · ") || "starting…";
  }

  function renderRoster() {
    const list = $("roster");
    list.textContent = "";
    state.students.forEach(function (student) {
      const item = el("li");
      item.appendChild(el("span", "name", student.name));
      item.appendChild(el("span", "where", where(student)));
      if (student.voted) { item.appendChild(el("span", "voted", "✓")); }
      list.appendChild(item);
    });
  }

  function renderResults() {
    const body = $("results-body");
    body.textContent = "";
    state.results.forEach(function (poll) {
      const row = el("tr");
      row.appendChild(el("td", "", poll.id));
      const what = el("td", "", poll.lessonTitle + ", question " + (poll.question + 1));
      row.appendChild(what);
      [0, 1].forEach(function (round) {
        const counts = poll.counts[round];
        row.appendChild(el("td", "", counts ? counts.join(" / ") :
          poll.voters[round] + " voted"));
      });
      body.appendChild(row);
    });
    const names = $("names").checked ? "1" : "0";
    $("csv").href = "/teacher/results.csv?key=" + encodeURIComponent(key) + "&names=" + names;
    $("md").href = "/teacher/results.md?key=" + encodeURIComponent(key) + "&names=" + names;
  }

  function bars(poll) {
    const chart = $("chart");
    chart.textContent = "";
    const counts = poll.counts || [];
    const top = Math.max(1, ...counts.map(function (c) { return Math.max(0, ...c); }));
    if (counts.length === 2) {
      const legend = el("div", "legend");
      legend.appendChild(el("span", "key r1"));
      legend.appendChild(document.createTextNode("vote 1 (" + poll.voters[0] + ")"));
      legend.appendChild(el("span", "key r2"));
      legend.appendChild(document.createTextNode("vote 2 (" + poll.voters[1] + ")"));
      chart.appendChild(legend);
    }
    poll.choices.forEach(function (text, index) {
      const right = poll.answer === index;
      const row = el("div", "choice" + (right ? " right" : ""));
      row.appendChild(el("div", "label", (index + 1) + ". " + text + (right ? "  ✓" : "")));
      const stack = el("div", "bars");
      counts.forEach(function (roundCounts, round) {
        const line = el("div", "bar-row");
        if (counts.length === 2) { line.appendChild(el("span", "which", "vote " + (round + 1))); }
        const bar = el("div", "bar r" + (round + 1) + (counts.length === 1 ? " only" : ""));
        bar.style.width = (70 * roundCounts[index] / top) + "%";
        line.appendChild(bar);
        line.appendChild(el("span", "n", roundCounts[index]));
        stack.appendChild(line);
      });
      row.appendChild(stack);
      chart.appendChild(row);
    });
  }

  function renderStage() {
    const poll = state.poll;
    const lead = state.lead ? lessonOf(state.lead) : null;
    $("lesson-title").textContent = poll ? poll.lessonTitle + " — question " +
      (poll.question + 1) : lead ? lead.title + " — open for everyone" :
      "No lesson is led: everyone works alone";
    const chart = $("chart");
    chart.textContent = "";
    if (!poll) {
      $("prompt").textContent = lead ? "Everyone has the lesson open. Move the class to " +
        "a question when they have read it." : "Pick a lesson below and open it for " +
        "everyone, or move the class straight to one of its questions.";
      $("phase-line").textContent = "";
      if (!lead && joinQr) {  // nothing led yet: the way in, large, for the room
        const welcome = el("div", "welcome");
        const qr = el("img");
        qr.src = joinQr;
        qr.alt = "QR code of the class link";
        welcome.appendChild(qr);
        const words = el("div");
        words.appendChild(el("div", "how", "Scan, or type the class link:"));
        words.appendChild(el("div", "link", joinLink));
        words.appendChild(el("div", "how", "then choose a name (or none) and press Join."));
        welcome.appendChild(words);
        chart.appendChild(welcome);
      }
      return;
    }
    $("prompt").textContent = poll.prompt;
    $("phase-line").textContent = PHASE_WORDS[poll.phase] || poll.phase;
    if (poll.round) {
      const voted = poll.ballots[poll.round - 1];
      const big = el("div", "big-count", voted);
      big.appendChild(el("small", "", " of " + state.connected + " have voted"));
      chart.appendChild(big);
      const list = el("ol", "");
      poll.choices.forEach(function (text) { list.appendChild(el("li", "label", text)); });
      list.className = "plain-choices";
      chart.appendChild(list);
    } else {
      bars(poll);
    }
  }

  function render() {
    if (!state) { return; }
    $("count").textContent = state.connected;
    $("count-word").textContent = state.connected === 1 ? "student" : "students";
    renderRoster();
    renderResults();
    renderStage();
    document.querySelectorAll("[data-phase]").forEach(function (button) {
      button.disabled = !state.poll;
      button.classList.toggle("on", !!state.poll && state.poll.phase === button.dataset.phase);
    });
    $("next").disabled = !state.poll || state.poll.phase === "play";
    $("free").disabled = !state.lead;
    renderQuestions();
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("lesson").addEventListener("change", renderQuestions);
    $("open").addEventListener("click", function () {
      send({ do: "open", lesson: $("lesson").value });
    });
    $("free").addEventListener("click", function () { send({ do: "free" }); });
    $("next").addEventListener("click", function () { send({ do: "next" }); });
    document.querySelectorAll("[data-phase]").forEach(function (button) {
      button.addEventListener("click", function () {
        send({ do: "phase", phase: button.dataset.phase });
      });
    });
    $("names").addEventListener("change", function () { if (state) { renderResults(); } });
    $("hide-names").addEventListener("click", function () {
      const side = $("side");
      side.classList.toggle("hidden-names");
      $("hide-names").textContent = side.classList.contains("hidden-names") ?
        "Show names" : "Hide names";
    });
    $("tab-students").addEventListener("click", function () {
      $("roster").hidden = false; $("results").hidden = true;
      $("tab-students").classList.add("on"); $("tab-results").classList.remove("on");
    });
    $("tab-results").addEventListener("click", function () {
      $("roster").hidden = true; $("results").hidden = false;
      $("tab-results").classList.add("on"); $("tab-students").classList.remove("on");
    });
    document.addEventListener("keydown", function (event) {
      if (event.target instanceof HTMLSelectElement || event.ctrlKey || event.metaKey ||
          event.altKey) { return; }
      const phases = ["vote", "show", "discuss", "revote", "reveal", "play"];
      if (event.key === "n" || event.key === "N") { send({ do: "next" }); }
      else if (/^[1-6]$/.test(event.key)) { send({ do: "phase", phase: phases[+event.key - 1] }); }
    });
    connect();
  });
})();
