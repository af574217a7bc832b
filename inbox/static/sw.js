// Airlock inbox service worker (docs/phone.md), served at /sw.js so that
// it controls the whole inbox. It keeps the app shell (the inbox's own
// static files, listed below) and nothing else: never a page, never an
// API answer, so no request's arguments, reasoning or context ever sit in
// a cache on the device. Offline it answers a page with "offline". It
// shows Web Pushes, which carry only {request_id, tool, deadline_at}, and
// a click on one opens the request's page.
'use strict';

var CACHE = 'airlock-shell-v1';
var SHELL = ['/static/inbox.css', '/static/inbox.js', '/static/icon.svg', '/static/icon-192.png', '/static/offline.html'];

self.addEventListener('install', function (event) {
  event.waitUntil(caches.open(CACHE).then(function (c) { return c.addAll(SHELL); }).then(function () { return self.skipWaiting(); }));
});

self.addEventListener('activate', function (event) {
  event.waitUntil(caches.keys().then(function (names) {
    return Promise.all(names.filter(function (n) { return n !== CACHE; }).map(function (n) { return caches.delete(n); }));
  }).then(function () { return self.clients.claim(); }));
});

self.addEventListener('fetch', function (event) {
  var req = event.request;
  if (req.method !== 'GET') return;
  var url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (SHELL.indexOf(url.pathname) >= 0 && url.search === '') {
    // The shell: from the network, so an upgraded server's files are
    // used at once, kept for offline; from the cache when offline.
    event.respondWith(fetch(req).then(function (res) {
      if (res.ok) {
        var copy = res.clone();
        caches.open(CACHE).then(function (c) { return c.put(url.pathname, copy); });
      }
      return res;
    }).catch(function () {
      return caches.match(url.pathname).then(function (hit) { return hit || Response.error(); });
    }));
    return;
  }
  if (req.mode === 'navigate') {
    // A page: from the network only, never kept; offline, the shell's
    // offline page.
    event.respondWith(fetch(req).catch(function () {
      return caches.match('/static/offline.html').then(function (hit) {
        return hit || new Response('Offline', { status: 503, headers: { 'Content-Type': 'text/plain; charset=utf-8' } });
      });
    }));
  }
  // Anything else (the API, live updates) goes to the network untouched.
});

self.addEventListener('push', function (event) {
  var m = {};
  try { m = event.data ? event.data.json() : {}; } catch (e) { m = {}; }
  var id = typeof m.request_id === 'string' ? m.request_id : '';
  var tool = typeof m.tool === 'string' && m.tool ? m.tool : 'a request';
  var by = Date.parse(m.deadline_at);
  var body = isNaN(by) ? 'Open it to decide.' : 'Decide by ' + new Date(by).toLocaleString() + '.';
  event.waitUntil(self.registration.showNotification('Airlock: ' + tool, {
    body: body,
    tag: id || 'airlock',
    icon: '/static/icon-192.png',
    data: { url: id ? '/requests/' + encodeURIComponent(id) : '/' }
  }));
});

self.addEventListener('notificationclick', function (event) {
  event.notification.close();
  var url = (event.notification.data && event.notification.data.url) || '/';
  event.waitUntil(self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then(function (wins) {
    for (var i = 0; i < wins.length; i++) {
      if ('navigate' in wins[i] && 'focus' in wins[i]) {
        return wins[i].navigate(url).then(function (w) { return w && w.focus(); });
      }
    }
    return self.clients.openWindow(url);
  }));
});
