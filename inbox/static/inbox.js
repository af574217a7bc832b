// Airlock inbox: live updates, countdowns and keyboard shortcuts.
// Loaded from /static/inbox.js (the Content-Security-Policy allows no inline
// script). It never parses server text as script and never assigns
// innerHTML: live lists arrive as HTML rendered and escaped by the server's
// html/template and are parsed with DOMParser, which runs nothing.
(function () {
  'use strict';
  var body = document.body;
  var page = body.dataset.page;
  var baseTitle = body.dataset.title || 'Airlock';

  function setCount(n) {
    document.title = (n > 0 ? '(' + n + ') ' : '') + baseTitle + ' · Airlock';
    var nav = document.getElementById('nav-count');
    if (nav) {
      nav.textContent = String(n);
      nav.setAttribute('aria-label', n + ' pending');
    }
  }

  // Countdowns: every [data-deadline] shows the time left, each second.
  function leftText(ms) {
    if (ms <= 0) return 'deadline passed';
    var s = Math.floor(ms / 1000);
    var d = Math.floor(s / 86400), h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60;
    var pad = function (x) { return (x < 10 ? '0' : '') + x; };
    if (s >= 172800) return d + 'd ' + (h % 24) + 'h left';
    if (s >= 3600) return h + 'h ' + pad(m) + 'm left';
    return Math.floor(s / 60) + 'm ' + pad(s % 60) + 's left';
  }
  function tick() {
    var now = Date.now();
    var els = document.querySelectorAll('[data-deadline]');
    for (var i = 0; i < els.length; i++) {
      var ms = Date.parse(els[i].dataset.deadline) - now;
      var text = leftText(ms);
      if (els[i].textContent !== text) els[i].textContent = text;
      els[i].classList.toggle('soon', ms < 60000);
    }
  }
  tick();
  setInterval(tick, 1000);

  // Lists: j/k move the selection; Enter opens (the rows are links).
  function rowLinks() {
    return Array.prototype.slice.call(document.querySelectorAll('.rows .row-link'));
  }
  var selected = null; // the data-id of the selected row
  function select(link) {
    var rows = document.querySelectorAll('.rows .row');
    for (var i = 0; i < rows.length; i++) rows[i].classList.remove('selected');
    if (!link) return;
    link.parentElement.classList.add('selected');
    selected = link.parentElement.dataset.id;
    link.focus();
  }
  function move(delta) {
    var links = rowLinks();
    if (links.length === 0) return;
    var i = links.indexOf(document.activeElement);
    if (i < 0) {
      var ids = links.map(function (l) { return l.parentElement.dataset.id; });
      i = ids.indexOf(selected);
    }
    i = i < 0 ? (delta > 0 ? 0 : links.length - 1) : Math.max(0, Math.min(links.length - 1, i + delta));
    select(links[i]);
  }

  // Desktop notifications of new pending requests while this tab is
  // hidden. The browser's permission is asked only when the reviewer
  // clicks the button, never on load; the reviewer's choice is kept in
  // this browser (localStorage), and can be turned off the same way.
  var notifyButton = document.getElementById('notify');
  var notifyKey = 'airlock.notify';
  function notifying() {
    return window.Notification && Notification.permission === 'granted' && localStorage.getItem(notifyKey) === 'on';
  }
  function showNotifyState() {
    if (!notifyButton) return;
    if (!window.Notification) return;
    notifyButton.hidden = false;
    if (Notification.permission === 'denied') {
      notifyButton.textContent = 'Notifications blocked by this browser';
      notifyButton.disabled = true;
    } else if (notifying()) {
      notifyButton.textContent = 'Notifications on: turn off';
      notifyButton.setAttribute('aria-pressed', 'true');
    } else {
      notifyButton.textContent = 'Notify me of new requests';
      notifyButton.setAttribute('aria-pressed', 'false');
    }
  }
  if (notifyButton && window.Notification) {
    notifyButton.addEventListener('click', function () {
      if (notifying()) {
        localStorage.setItem(notifyKey, 'off');
        showNotifyState();
        return;
      }
      localStorage.setItem(notifyKey, 'on');
      var asked = Notification.requestPermission(function () { showNotifyState(); });
      if (asked && asked.then) asked.then(showNotifyState);
    });
    showNotifyState();
  }
  function notifyNew(node, ids) {
    if (!notifying() || document.visibilityState !== 'hidden' || ids.length === 0) return;
    var shown = ids.slice(0, 3);
    shown.forEach(function (id) {
      var row = node.querySelector('.row[data-id="' + CSS.escape(id) + '"]');
      if (!row) return;
      var part = function (sel) { var e = row.querySelector(sel); return e ? e.textContent.trim().replace(/\s+/g, ' ') : ''; };
      var n = new Notification('Airlock: ' + part('.headline'), {
        body: [part('.from'), part('.row-args'), part('.deadline')].filter(Boolean).join('\n'),
        tag: id
      });
      n.onclick = function () { window.focus(); window.location.href = '/requests/' + encodeURIComponent(id); };
    });
    if (ids.length > shown.length) {
      new Notification('Airlock: ' + (ids.length - shown.length) + ' more new requests', { tag: 'airlock-more' });
    }
  }

  // The installable inbox (docs/phone.md): the service worker keeps the
  // app shell only, never a page or an API answer. Registering asks the
  // reviewer nothing.
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch(function () {});
  }

  // Web Push: "Notify this device" subscribes this browser, so that a
  // request reaches it with the inbox closed (installed on a phone's home
  // screen, for instance). Permission is asked only on the click. The
  // subscription's id is kept in this browser, to turn it off again.
  var pushButton = document.getElementById('push');
  var pushStatus = document.getElementById('push-status');
  var pushKey = 'airlock.push';
  function csrf() {
    var el = document.querySelector('form.signout input[name="csrf"]');
    return el ? el.value : '';
  }
  function pushSay(text) {
    if (!pushStatus) return;
    pushStatus.hidden = !text;
    pushStatus.textContent = text;
  }
  function pushShow() {
    var on = Boolean(localStorage.getItem(pushKey)) && window.Notification && Notification.permission === 'granted';
    pushButton.hidden = false;
    pushButton.disabled = window.Notification && Notification.permission === 'denied';
    pushButton.textContent = pushButton.disabled ? 'Notifications blocked by this browser' : on ? 'This device is notified: turn off' : 'Notify this device';
    pushButton.setAttribute('aria-pressed', on ? 'true' : 'false');
  }
  function keyBytes(b64) {
    var s = atob(b64.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((b64.length + 3) % 4));
    var out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function answer(res) {
    return res.json().catch(function () { return {}; }).then(function (js) {
      if (!res.ok) throw new Error(js.message || 'the server answered ' + res.status);
      return js;
    });
  }
  function pushOn() {
    pushSay('Asking this browser…');
    return Notification.requestPermission().then(function (p) {
      if (p !== 'granted') throw new Error('this browser did not allow notifications');
      return Promise.all([navigator.serviceWorker.ready, fetch('/push/key', { credentials: 'same-origin' }).then(answer)]);
    }).then(function (got) {
      return got[0].pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(got[1].public_key) });
    }).then(function (sub) {
      var form = new URLSearchParams({ csrf: csrf(), subscription: JSON.stringify(sub.toJSON()) });
      return fetch('/push/subscriptions', { method: 'POST', credentials: 'same-origin', body: form }).then(answer);
    }).then(function (saved) {
      localStorage.setItem(pushKey, saved.id);
      pushSay('This device will be notified of requests you may decide.');
    });
  }
  function pushOff() {
    var id = localStorage.getItem(pushKey);
    localStorage.removeItem(pushKey);
    return navigator.serviceWorker.ready.then(function (reg) {
      return reg.pushManager.getSubscription();
    }).then(function (sub) {
      return sub ? sub.unsubscribe() : true;
    }).then(function () {
      if (!id) return null;
      return fetch('/push/subscriptions/' + encodeURIComponent(id) + '/delete', {
        method: 'POST', credentials: 'same-origin', body: new URLSearchParams({ csrf: csrf() })
      }).then(function (res) { if (!res.ok && res.status !== 204) return answer(res); return null; });
    }).then(function () { pushSay('This device is no longer notified.'); });
  }
  if (pushButton && 'serviceWorker' in navigator && window.PushManager && window.Notification) {
    pushButton.addEventListener('click', function () {
      pushButton.disabled = true;
      var on = Boolean(localStorage.getItem(pushKey));
      (on ? pushOff() : pushOn()).catch(function (e) {
        pushSay('Not done: ' + e.message + '.');
      }).then(function () { pushShow(); });
    });
    pushShow();
  }

  // The live pending list.
  var live = document.getElementById('live');
  if (page === 'pending' && live && window.EventSource) {
    var status = document.getElementById('live-status');
    var es = new EventSource(live.dataset.live);
    var known = null;
    es.addEventListener('open', function () { status.textContent = 'Live'; });
    es.addEventListener('pending', function (ev) {
      var doc = new DOMParser().parseFromString(ev.data, 'text/html');
      var fresh = doc.getElementById('pending-list');
      var old = document.getElementById('pending-list');
      if (!fresh || !old) return;
      var hadFocus = old.contains(document.activeElement);
      // The ticked rows stay ticked across a refresh (Review selected).
      var picked = Array.prototype.map.call(old.querySelectorAll('input.pick:checked'), function (c) { return c.value; });
      var node = document.adoptNode(fresh);
      old.replaceWith(node);
      Array.prototype.forEach.call(node.querySelectorAll('input.pick'), function (c) { c.checked = picked.indexOf(c.value) >= 0; });
      var ids = Array.prototype.map.call(node.querySelectorAll('.rows .row'), function (r) { return r.dataset.id; });
      var n = Number(node.dataset.count || 0);
      setCount(n);
      if (known !== null) {
        var addedIDs = ids.filter(function (id) { return known.indexOf(id) < 0; });
        var added = addedIDs.length;
        var gone = known.filter(function (id) { return ids.indexOf(id) < 0; }).length;
        notifyNew(node, addedIDs);
        if (added || gone) {
          status.textContent = 'Live · ' + n + ' pending' + (added ? ', ' + added + ' new' : '') + (gone ? ', ' + gone + ' gone' : '');
        }
      } else {
        status.textContent = 'Live';
      }
      known = ids;
      var again = selected && node.querySelector('.row[data-id="' + CSS.escape(selected) + '"] .row-link');
      if (again) {
        again.parentElement.classList.add('selected');
        if (hadFocus) again.focus();
      }
      tick();
    });
    es.addEventListener('error', function () {
      status.textContent = es.readyState === EventSource.CLOSED
        ? 'Live updates stopped: reload the page (you may need to sign in again).'
        : 'Reconnecting…';
    });
  }

  // An open request learns at once when it is decided, cancelled or
  // expires elsewhere: the outcome (who, when, the note) appears, the
  // countdown stops and the decision controls are disabled.
  var art = document.querySelector('article.request');
  if (page === 'request' && art && art.dataset.state === 'pending' && window.EventSource) {
    var res = new EventSource('/live?request=' + encodeURIComponent(art.dataset.id));
    // A vote cast elsewhere on a request needing several approvals: the
    // quorum line and the Votes panel are replaced by the fresh ones.
    res.addEventListener('votes', function (ev) {
      var doc = new DOMParser().parseFromString(ev.data, 'text/html');
      var q = doc.getElementById('quorum');
      var oldQ = document.getElementById('quorum');
      if (q && oldQ) oldQ.textContent = q.textContent;
      var v = doc.getElementById('votes');
      if (!v) return;
      var node = document.adoptNode(v);
      var oldV = document.getElementById('votes');
      var outcome = document.getElementById('outcome');
      if (oldV) oldV.replaceWith(node);
      else if (outcome) art.insertBefore(node, outcome);
      else art.appendChild(node);
    });
    res.addEventListener('outcome', function (ev) {
      res.close();
      var doc = new DOMParser().parseFromString(ev.data, 'text/html');
      var fresh = doc.getElementById('outcome');
      if (!fresh) return;
      var state = fresh.dataset.state;
      var node = document.adoptNode(fresh);
      var old = document.getElementById('outcome');
      if (old) old.replaceWith(node); else art.appendChild(node);
      art.dataset.state = state;
      var who = document.getElementById('decided-by');
      var when = node.querySelector('time');
      var box = document.getElementById('live-state');
      box.textContent = 'Decided elsewhere: this request is now ' + state +
        (who ? ' (by ' + who.textContent.trim() + (when ? ', ' + when.textContent.trim() : '') + ')' : '') +
        '. Nothing you send now can change it; the outcome is below.';
      box.hidden = false;
      var badge = document.getElementById('state-badge');
      if (badge) {
        badge.textContent = state;
        badge.className = 'badge state state-' + state;
      }
      var ctl = document.querySelectorAll('#decide button, #decide textarea, #decide select, #decide-bar button');
      for (var i = 0; i < ctl.length; i++) ctl[i].disabled = true;
      var cd = document.querySelectorAll('.countdown');
      for (var j = 0; j < cd.length; j++) {
        cd[j].removeAttribute('data-deadline');
        cd[j].classList.remove('soon');
        cd[j].textContent = state;
      }
      var bar = document.getElementById('decide-bar');
      if (bar) bar.hidden = true;
      var dlg = document.getElementById('confirm');
      if (dlg && dlg.open) dlg.close('cancel');
      node.scrollIntoView({ block: 'nearest' });
    });
  }

  // Seeing all of it: which parts of the arguments have been on screen.
  // The block is cut into slices; a slice is seen once any of it was in
  // the viewport above the decide bar. A marker stripe covers the slices
  // not yet seen, "Jump to the end" reaches the end in one action, and the
  // fraction seen and the seconds the page has been open go with the
  // decision as the reviewer's client's claim (docs/inbox.md).
  var seeing = (function () {
    var pre = document.getElementById('arguments');
    var marker = document.getElementById('args-unseen');
    var markerText = document.getElementById('args-unseen-text');
    var markerJump = document.getElementById('args-unseen-jump');
    var label = document.getElementById('args-seen');
    if (!pre || !marker || page !== 'request') return null;
    var opened = Date.now();
    var slices = 200;
    var seen = new Uint8Array(slices);
    var count = 0;
    function barTop() {
      var bar = document.getElementById('decide-bar');
      if (!bar || bar.hidden || bar.classList.contains('away')) return window.innerHeight;
      var br = bar.getBoundingClientRect();
      return br.height > 0 ? Math.min(window.innerHeight, Math.max(0, br.top)) : window.innerHeight;
    }
    function covered() {
      var r = pre.getBoundingClientRect();
      if (r.height <= 0) return;
      var bottom = barTop();
      var from = Math.max(0, -r.top), to = Math.min(r.height, bottom - r.top);
      if (to <= from) return;
      var a = Math.floor(from / r.height * slices), z = Math.min(slices - 1, Math.ceil(to / r.height * slices) - 1);
      for (var i = a; i <= z; i++) if (!seen[i]) { seen[i] = 1; count++; }
    }
    function paint() {
      var f = count / slices;
      label.hidden = false;
      if (f >= 1) {
        marker.hidden = true;
        label.textContent = 'Seen in full.';
        label.className = 'args-seen done';
        return;
      }
      var pct = Math.ceil((1 - f) * 100);
      label.textContent = 'Not yet seen: ' + pct + ' %.';
      label.className = 'args-seen';
      // The marker sits where the unseen part begins: at the bottom of
      // the screen (above the decide bar) while the arguments go on below
      // it, and at their end when what is left was skipped above.
      var endSeen = seen[slices - 1] === 1;
      markerText.textContent = endSeen
        ? 'Not yet on your screen: ' + pct + ' % of these arguments, above (skipped).'
        : '▼ Not yet on your screen: ' + pct + ' % of these arguments, below.';
      markerJump.hidden = endSeen;
      marker.style.bottom = (window.innerHeight - barTop()) + 'px';
      marker.hidden = false;
    }
    var pending = false;
    function update() {
      pending = false;
      covered();
      paint();
    }
    function later() {
      if (!pending) { pending = true; window.requestAnimationFrame(update); }
    }
    window.addEventListener('scroll', later, { passive: true });
    window.addEventListener('resize', later);
    pre.addEventListener('scroll', later, { passive: true });
    function jumpToEnd(e) {
      e.preventDefault();
      var end = document.getElementById('args-end');
      // The end of the block lands mid-screen, above the decide bar.
      end.scrollIntoView({ block: 'center' });
      end.focus({ preventScroll: true });
      update();
    }
    var jump = document.getElementById('args-jump');
    if (jump) jump.addEventListener('click', jumpToEnd);
    markerJump.addEventListener('click', jumpToEnd);
    update();
    return {
      fraction: function () { covered(); return count / slices; },
      seconds: function () { return Math.round((Date.now() - opened) / 1000); },
    };
  })();

  // Every decision is confirmed the same way, whether it comes from a
  // click, a tap or a key: the dialog restates the tool (or title), the
  // arguments with their size and digest, the answer, how long an approval
  // lets the call start, and the note.
  var dialog = document.getElementById('confirm');
  function confirmThen(heading, facts, okLabel, okClass, then) {
    if (!dialog || typeof dialog.showModal !== 'function') {
      var text = facts.map(function (f) { return f[0] + ': ' + (typeof f[1] === 'string' ? f[1] : f[1].textContent); }).join('\n');
      if (window.confirm(heading + '\n\n' + text)) then();
      return;
    }
    document.getElementById('confirm-h').textContent = heading;
    var box = document.getElementById('confirm-text');
    while (box.firstChild) box.removeChild(box.firstChild);
    var dl = document.createElement('dl');
    dl.className = 'kv';
    facts.forEach(function (f) {
      var row = document.createElement('div');
      var dt = document.createElement('dt');
      var dd = document.createElement('dd');
      dt.textContent = f[0];
      if (typeof f[1] === 'string') {
        dd.textContent = f[1];
        dd.className = 'text';
      } else {
        dd.appendChild(f[1]);
      }
      if (f[2]) dd.id = f[2];
      row.appendChild(dt);
      row.appendChild(dd);
      dl.appendChild(row);
    });
    box.appendChild(dl);
    var ok = document.getElementById('confirm-ok');
    ok.textContent = okLabel;
    ok.className = okClass;
    dialog.returnValue = '';
    dialog.addEventListener('close', function onClose() {
      dialog.removeEventListener('close', onClose);
      if (dialog.returnValue === 'ok') then();
    });
    dialog.showModal();
    ok.focus();
  }
  function headline() {
    var h = document.getElementById('req-h');
    return h ? h.textContent.trim() : 'this request';
  }
  // what names the request in a confirmation: the tool that would run,
  // or the MCP request's title.
  function what() {
    var tool = document.querySelector('code.tool');
    return tool ? ['Tool', tool.textContent.trim(), 'confirm-tool'] : ["Request (the agent's claim)", headline(), 'confirm-tool'];
  }
  // theCall restates the call in a confirmation: the arguments whole, as
  // the page shows them, with their size and digest.
  function theCall() {
    var args = document.getElementById('arguments');
    if (!args) return [];
    var copy = args.cloneNode(true);
    copy.id = 'confirm-arguments';
    copy.removeAttribute('aria-labelledby');
    var size = document.getElementById('args-size');
    var digest = document.getElementById('digest');
    var d = digest ? digest.textContent : '';
    var facts = [['Arguments', copy], ['Size, digest', (size ? size.textContent : '') + ', ' + (d.length > 19 ? d.slice(0, 19) + '…' : d), 'confirm-digest']];
    if (seeing) {
      var f = seeing.fraction();
      facts.push(['Seen in full', f >= 1 ? 'yes' : 'no: ' + Math.floor(f * 100) + ' % of the arguments were on your screen', 'confirm-seen']);
    }
    return facts;
  }
  // review adds what this page saw of the arguments to a decision form:
  // the reviewer's client's claim, recorded with the decision.
  function review(form) {
    if (!seeing || form.querySelector('input[name="review_seen_fraction"]')) return;
    [['review_seen_fraction', seeing.fraction().toFixed(3)], ['review_seconds_open', String(seeing.seconds())]].forEach(function (kv) {
      var i = document.createElement('input');
      i.type = 'hidden';
      i.name = kv[0];
      i.value = kv[1];
      form.appendChild(i);
    });
  }
  // signDecision signs the decision form asks for with the reviewer's
  // passkey (docs/phone.md): the server gives the challenge of exactly
  // this decision, and the form carries the assertion.
  function signDecision(form) {
    var fields = new URLSearchParams(new FormData(form));
    fields.delete('confirmed');
    return fetch(form.getAttribute('action').replace(/\/decide$/, '/passkey'), {
      method: 'POST', credentials: 'same-origin', body: fields
    }).then(answer).then(function (opts) {
      return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(opts.publicKey) });
    }).then(function (cred) {
      var old = form.querySelector('input[name="passkey"]');
      if (old) form.removeChild(old);
      var field = document.createElement('input');
      field.type = 'hidden';
      field.name = 'passkey';
      field.value = JSON.stringify(cred.toJSON());
      form.appendChild(field);
    });
  }
  function guard(form, kind) {
    if (!form) return;
    form.addEventListener('submit', function (e) {
      if (form.dataset.confirmed === '1') return;
      e.preventDefault();
      var submitter = e.submitter || null;
      var facts = [what()].concat(theCall());
      var heading, okLabel, okClass;
      var q = art.dataset.question;
      if (kind === 'approve' && q) {
        var answer = submitter && submitter.name === 'answer' ? submitter.value : (document.getElementById('answer') || {}).value || '';
        facts.push(['Answer', answer, 'confirm-answer']);
        heading = 'Send this answer?';
        okLabel = 'Send answer';
        okClass = 'primary approve';
      } else if (kind === 'approve') {
        var sel = document.getElementById('valid_for');
        if (sel) facts.push(['May start for', sel.options[sel.selectedIndex].textContent.trim(), 'confirm-validity']);
        else facts.push(['Effect', 'Airlock applies the command when you approve', 'confirm-validity']);
        heading = 'Approve this request?';
        okLabel = 'Approve';
        okClass = 'primary approve';
      } else {
        heading = q ? 'Decline to answer?' : 'Deny this request?';
        okLabel = q ? 'Decline' : 'Deny';
        okClass = 'danger deny';
      }
      var noteField = form.querySelector('textarea[name="note"]');
      var note = noteField ? noteField.value.trim() : '';
      facts.push(['Note', note || 'none' + (noteField ? ' (you can write one in the form first)' : ''), 'confirm-note']);
      confirmThen(heading, facts, okLabel, okClass, function () {
        form.dataset.confirmed = '1';
        review(form);
        // The server records only a confirmed form; without this field it
        // answers with its own confirmation page.
        var mark = document.createElement('input');
        mark.type = 'hidden';
        mark.name = 'confirmed';
        mark.value = 'yes';
        form.appendChild(mark);
        var submit = function () { if (submitter) form.requestSubmit(submitter); else form.requestSubmit(); };
        if (document.getElementById('decide').dataset.passkey !== '1') { submit(); return; }
        signDecision(form).then(submit).catch(function (err) {
          form.dataset.confirmed = '';
          form.removeChild(mark);
          var p = document.getElementById('decide-passkey-problem');
          p.hidden = false;
          p.textContent = 'Nothing was recorded: ' + err.message;
        });
      });
    });
  }
  // A batch is confirmed the same way: the dialog restates how many
  // requests, each tool with its arguments' size and digest, the validity
  // and the note. The table above it showed every call in full.
  var batchForm = page === 'batch' && document.getElementById('batch-form');
  if (batchForm) {
    batchForm.addEventListener('submit', function (e) {
      if (batchForm.dataset.confirmed === '1') return;
      e.preventDefault();
      var submitter = e.submitter || null;
      var approve = !submitter || submitter.value === 'approve';
      var ids = Array.prototype.map.call(batchForm.querySelectorAll('input[name="id"]'), function (i) { return i.value; });
      var list = document.createElement('ul');
      list.className = 'batch-confirm-list';
      ids.forEach(function (id) {
        var row = document.querySelector('.batch-row[data-id="' + CSS.escape(id) + '"]');
        if (!row) return;
        var li = document.createElement('li');
        var tool = row.querySelector('.batch-call a');
        var size = row.querySelector('.args-size');
        var digest = row.querySelector('.digest');
        li.textContent = (tool ? tool.textContent.trim() : id) + (size ? ' · ' + size.textContent : '') +
          (digest ? ' · ' + digest.textContent.slice(0, 19) + '…' : '');
        list.appendChild(li);
      });
      var facts = [['Requests, each its own decision', list, 'confirm-batch']];
      if (approve) {
        var sel = document.getElementById('batch-valid_for');
        facts.push(['Each may start for', sel.options[sel.selectedIndex].textContent.trim(), 'confirm-validity']);
      }
      var note = document.getElementById('batch-note').value.trim();
      facts.push(['Note', note || 'none (you can write one in the form first)', 'confirm-note']);
      var n = ids.length;
      confirmThen((approve ? 'Approve ' : 'Deny ') + n + (n === 1 ? ' request?' : ' requests?'), facts,
        (approve ? 'Approve ' : 'Deny ') + n, approve ? 'primary approve' : 'danger deny', function () {
          batchForm.dataset.confirmed = '1';
          if (submitter) batchForm.requestSubmit(submitter); else batchForm.requestSubmit();
        });
    });
  }
  if (art) {
    guard(document.getElementById('approve-form'), 'approve');
    guard(document.getElementById('deny-form'), 'deny');
    // The decide bar acts through the forms, so through the same
    // confirmation, with the form's validity and note.
    var barApprove = document.getElementById('bar-approve');
    var barDeny = document.getElementById('bar-deny');
    if (barApprove) barApprove.addEventListener('click', function () { document.getElementById('approve-form').requestSubmit(); });
    if (barDeny) barDeny.addEventListener('click', function () { document.getElementById('deny-form').requestSubmit(); });
    // While the Decide form itself is on screen, the bar steps aside.
    var bar = document.getElementById('decide-bar');
    var form = document.getElementById('decide');
    if (bar && form) {
      var placing = false;
      var place = function () {
        placing = false;
        var r = form.getBoundingClientRect();
        bar.classList.toggle('away', r.top < window.innerHeight && r.bottom > 0);
      };
      var later = function () {
        if (!placing) { placing = true; window.requestAnimationFrame(place); }
      };
      window.addEventListener('scroll', later, { passive: true });
      window.addEventListener('resize', later);
      place();
    }
  }

  // Arguments keep their lines: a line wider than its block scrolls
  // sideways inside it, and a hint says so while one does.
  var args = document.getElementById('arguments');
  var wide = document.getElementById('arguments-wide');
  if (args && wide) {
    var showWide = function () { wide.hidden = args.scrollWidth <= args.clientWidth; };
    window.addEventListener('resize', showWide);
    showWide();
  }

  // Long texts fold after a few lines, with a button to show them all.
  var folds = document.querySelectorAll('.collapsible');
  for (var f = 0; f < folds.length; f++) {
    (function (box) {
      var more = document.querySelector('.show-all[data-for="' + box.id + '"]');
      if (!more) return;
      box.classList.add('collapsed');
      if (box.scrollHeight <= box.clientHeight + 2) {
        box.classList.remove('collapsed');
        return;
      }
      more.hidden = false;
      more.addEventListener('click', function () {
        var open = box.classList.toggle('collapsed');
        more.textContent = open ? 'Show all of the claim' : 'Show less';
        more.setAttribute('aria-expanded', String(!open));
      });
      more.setAttribute('aria-expanded', 'false');
    })(folds[f]);
  }
  // a / d: approve or deny the open request, through the same confirmation.
  function decide(kind) {
    var approve = document.getElementById('approve-form');
    var deny = document.getElementById('deny-form');
    if (!art || !deny || deny.querySelector('button').disabled) return;
    if (kind === 'approve') {
      var q = art.dataset.question;
      if (q === 'choices') {
        var first = approve.querySelector('.choice');
        if (first) first.focus();
        return;
      }
      if (q === 'text') {
        document.getElementById('answer').focus();
        return;
      }
      approve.requestSubmit();
    } else {
      deny.requestSubmit();
    }
  }

  function typing(t) {
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  var gPressed = 0;
  document.addEventListener('keydown', function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (dialog && dialog.open) return;
    switch (e.key) {
      case 'j': move(1); break;
      case 'k': move(-1); break;
      case 'a': decide('approve'); break;
      case 'd': decide('deny'); break;
      case 'g': gPressed = Date.now(); return;
      case 'i':
        if (Date.now() - gPressed < 1500) { window.location.href = '/'; break; }
        return;
      default: return;
    }
    e.preventDefault();
  });
  document.addEventListener('focusin', function (e) {
    var link = e.target.closest && e.target.closest('.rows .row-link');
    if (link) {
      var rows = document.querySelectorAll('.rows .row.selected');
      for (var i = 0; i < rows.length; i++) rows[i].classList.remove('selected');
      link.parentElement.classList.add('selected');
      selected = link.parentElement.dataset.id;
    }
  });

  // Edit and approve: the editor checks, as the reviewer types, that the
  // arguments are a JSON object and, when the request carries the tool's
  // input schema, that they have its required keys with the types it
  // names; the server checks the schema in full. Nothing is sent while
  // they are not valid.
  var editForm = document.getElementById('edit-form');
  if (editForm) {
    var editArea = document.getElementById('edit-arguments');
    var editCheck = document.getElementById('edit-check');
    var schema = null;
    try { if (editForm.dataset.schema) schema = JSON.parse(editForm.dataset.schema); } catch (e) { schema = null; }
    var typeOf = function (v) {
      if (v === null) return 'null';
      if (Array.isArray(v)) return 'array';
      if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
      return typeof v;
    };
    var typeOK = function (want, v) {
      var got = typeOf(v);
      var wants = Array.isArray(want) ? want : [want];
      for (var i = 0; i < wants.length; i++) {
        if (wants[i] === got || (wants[i] === 'number' && got === 'integer')) return true;
      }
      return false;
    };
    var problem = function () {
      var v;
      try { v = JSON.parse(editArea.value); } catch (e) { return 'Not valid JSON: ' + e.message; }
      if (typeOf(v) !== 'object') return 'The arguments must be a JSON object ({…}).';
      if (schema && typeof schema === 'object') {
        var req = Array.isArray(schema.required) ? schema.required : [];
        for (var i = 0; i < req.length; i++) {
          if (!Object.prototype.hasOwnProperty.call(v, req[i])) return 'The tool\'s input schema requires "' + req[i] + '".';
        }
        var props = schema.properties || {};
        for (var k in v) {
          if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
          var p = props[k];
          if (p && p.type && !typeOK(p.type, v[k])) return '"' + k + '" must be ' + [].concat(p.type).join(' or ') + ' (the tool\'s input schema).';
          if (!p && schema.additionalProperties === false) return 'The tool\'s input schema has no "' + k + '".';
        }
      }
      return '';
    };
    var validate = function () {
      var msg = problem();
      editArea.setAttribute('aria-invalid', msg ? 'true' : 'false');
      editCheck.textContent = msg || (schema ? 'Valid JSON, matching the tool\'s input schema.' : 'Valid JSON object.');
      editCheck.className = msg ? 'hint bad' : 'hint';
      return msg;
    };
    editArea.addEventListener('input', validate);
    editForm.addEventListener('submit', function (e) {
      if (validate()) { e.preventDefault(); editArea.focus(); return; }
      review(editForm);
    });
  }
  // Passkeys (docs/phone.md): register one on the Passkeys page, and sign
  // in with one on the sign-in page. The server gives the options and
  // checks the answer; the browser's own JSON forms of both are used as
  // they are.
  var pkProblem = document.getElementById('passkey-problem');
  function pkSay(text) {
    if (!pkProblem) return;
    pkProblem.hidden = !text;
    pkProblem.textContent = text;
  }
  function pkPost(url, fields) {
    return fetch(url, { method: 'POST', credentials: 'same-origin', body: new URLSearchParams(fields) }).then(answer);
  }
  var pkSupported = window.PublicKeyCredential && PublicKeyCredential.parseCreationOptionsFromJSON;
  var pkRegister = document.getElementById('passkey-register');
  if (pkRegister && pkSupported) {
    pkRegister.addEventListener('submit', function (e) {
      e.preventDefault();
      var button = document.getElementById('passkey-add');
      button.disabled = true;
      pkSay('');
      pkPost('/passkeys/register/begin', { csrf: csrf() }).then(function (opts) {
        return navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(opts.publicKey) });
      }).then(function (cred) {
        return pkPost('/passkeys/register/finish', {
          csrf: csrf(), name: document.getElementById('passkey-name').value, credential: JSON.stringify(cred.toJSON())
        });
      }).then(function () {
        location.reload();
      }).catch(function (err) {
        pkSay('No passkey was added: ' + err.message);
        button.disabled = false;
      });
    });
  }
  var pkSignin = document.getElementById('signin-passkey');
  if (pkSignin && pkSupported) {
    document.getElementById('passkey-signin-p').hidden = false;
    pkSignin.addEventListener('click', function () {
      pkSignin.disabled = true;
      pkSay('');
      var fields = { csrf: pkSignin.dataset.csrf, next: pkSignin.dataset.next };
      pkPost('/signin/passkey/begin', fields).then(function (opts) {
        return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(opts.publicKey) });
      }).then(function (cred) {
        fields.credential = JSON.stringify(cred.toJSON());
        return pkPost('/signin/passkey/finish', fields);
      }).then(function (done) {
        location.assign(done.next || '/');
      }).catch(function (err) {
        pkSay('Not signed in: ' + err.message);
        pkSignin.disabled = false;
      });
    });
  }
})();
