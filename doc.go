// Package airlock is the domain of Airlock, a human-approval provider for AI
// agents' tool calls. It knows no I/O: it defines requests, their states and
// transitions, decisions, tokens and their roles, input validation, timeout
// parsing, the stable error codes, and the interfaces (Store, Clock, Policy)
// that the drivers and the provider service implement.
//
// A reader learns the product from this package; everything else is an
// adapter to a database, to HTTP or to MCP.
package airlock
