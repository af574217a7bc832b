package mcpserver

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// approvalRequestSchema is approval_request's input schema, copied byte for
// byte from the MCP brief (a copy is testdata/mcp-brief.txt). tools/list
// shows exactly it; a test compares the two structurally.
//
//go:embed approval_request.schema.json
var approvalRequestSchema []byte

// The other tools' input schemas. Every one refuses unknown properties,
// like the brief's.
const (
	approvalIDSchema = `{
  "type": "object",
  "properties": {
    "approvalId": {"type": "string", "description": "The approvalId that approval_request returned"}
  },
  "required": ["approvalId"],
  "additionalProperties": false
}`
	approvalStatusSchema = `{
  "type": "object",
  "properties": {
    "approvalId": {"type": "string", "description": "The approvalId that approval_request returned"},
    "waitSeconds": {
      "type": "integer",
      "minimum": 0,
      "maximum": 60,
      "description": "Optional. Wait up to this many seconds for a decision before answering (0, the default, answers at once)."
    }
  },
  "required": ["approvalId"],
  "additionalProperties": false
}`
	sessionOpenSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 200, "description": "What this session is, for the reviewer (e.g. the task you are working on)"},
    "metadata": {"type": "object", "description": "Optional facts about the session, shown to reviewers"}
  },
  "required": ["name"],
  "additionalProperties": false
}`
	sessionIDSchema = `{
  "type": "object",
  "properties": {
    "sessionId": {"type": "string", "description": "The sessionId that session_open returned"}
  },
  "required": ["sessionId"],
  "additionalProperties": false
}`
	workListSchema = `{
  "type": "object",
  "properties": {},
  "additionalProperties": false
}`
	workGetSchema = `{
  "type": "object",
  "properties": {
    "itemId": {"type": "string", "description": "Work item ID (wi_…), from work_list"}
  },
  "required": ["itemId"],
  "additionalProperties": false
}`
)

// Output schemas: the structuredContent of each tool's successful result.
const (
	approvalOutSchema = `{
  "type": "object",
  "properties": {
    "approvalId": {"type": "string"},
    "status": {"enum": ["pending", "approved", "denied", "expired", "cancelled"]},
    "kind": {"type": "string"},
    "title": {"type": "string"},
    "description": {"type": "string"},
    "targetType": {"type": "string"},
    "targetId": {"type": "string"},
    "sessionId": {"type": "string"},
    "proposal": {
      "type": "object",
      "properties": {
        "mode": {"enum": ["advisory", "command"]},
        "command": {
          "type": "object",
          "properties": {"method": {"type": "string"}, "input": {"type": "object"}},
          "required": ["method", "input"]
        }
      },
      "required": ["mode"]
    },
    "question": {
      "type": "object",
      "properties": {"choices": {"type": "array", "items": {"type": "string"}}}
    },
    "createdAt": {"type": "string", "format": "date-time"},
    "deadlineAt": {"type": "string", "format": "date-time", "description": "A pending request expires at this time"},
    "decision": {
      "type": "object",
      "properties": {
        "status": {"enum": ["approved", "denied", "expired", "cancelled"]},
        "note": {"type": "string", "description": "The reviewer's note: it informs, and changes nothing that was approved"},
        "answer": {"type": "string"},
        "decidedAt": {"type": "string", "format": "date-time"},
        "decidedBy": {"type": "string", "description": "Set when no person decided: policy:<rule> for a rule of the server's policy, grant:<id> for a reviewer's standing grant"},
        "decidedByName": {"type": "string", "description": "Who decided: the reviewer token's name, or a system actor such as system:expiry"},
        "expiresAt": {"type": "string", "format": "date-time", "description": "An approval's permission to start acting ends at this time"},
        "votes": {"type": "array", "description": "The votes that decided a request needing several approvals", "items": {"type": "object", "properties": {"principal": {"type": "string"}, "name": {"type": "string"}, "status": {"enum": ["approved", "denied"]}, "note": {"type": "string"}, "at": {"type": "string", "format": "date-time"}}, "required": ["principal", "name", "status", "at"]}}
      },
      "required": ["status", "decidedAt"]
    },
    "reviewers": {"type": "array", "items": {"type": "string"}, "description": "The reviewer groups whose members alone may decide this request"},
    "approvalsRequired": {"type": "integer", "description": "How many approvals from different reviewers this request needs; any denial decides"},
    "votes": {"type": "array", "description": "The votes cast so far", "items": {"type": "object", "properties": {"principal": {"type": "string"}, "name": {"type": "string"}, "status": {"enum": ["approved", "denied"]}, "note": {"type": "string"}, "at": {"type": "string", "format": "date-time"}}, "required": ["principal", "name", "status", "at"]}},
    "answer": {"type": "string", "description": "The reviewer's answer to the question"},
    "commandOutcome": {
      "type": "object",
      "properties": {
        "status": {"enum": ["awaiting_decision", "applied", "not_executed", "unknown"]},
        "detail": {"type": "string"},
        "appliedAt": {"type": "string", "format": "date-time"},
        "observed": {"type": "object"}
      },
      "required": ["status"]
    },
    "replayed": {"type": "boolean", "description": "True when an earlier call with the same idempotencyKey created this request"},
    "next": {"type": "string", "description": "Where the request stands and what to do now"}
  },
  "required": ["approvalId", "status", "kind", "createdAt", "deadlineAt", "next"]
}`
	sessionProperties = `
    "sessionId": {"type": "string"},
    "name": {"type": "string"},
    "status": {"enum": ["active", "waiting", "stale", "closed"], "description": "waiting: a linked request is pending; stale: no heartbeat for staleAfterSeconds (display only)"},
    "pendingCount": {"type": "integer"},
    "createdAt": {"type": "string", "format": "date-time"},
    "lastSeenAt": {"type": "string", "format": "date-time"},
    "closedAt": {"type": "string", "format": "date-time"},
    "staleAfterSeconds": {"type": "integer"}`
	sessionRequired = `"sessionId", "name", "status", "pendingCount", "createdAt", "staleAfterSeconds"`

	sessionOpenOutSchema = `{
  "type": "object",
  "properties": {` + sessionProperties + `,
    "next": {"type": "string"}
  },
  "required": [` + sessionRequired + `, "next"]
}`
	heartbeatOutSchema = `{
  "type": "object",
  "properties": {
    "session": {
      "type": "object",
      "properties": {` + sessionProperties + `
      },
      "required": [` + sessionRequired + `]
    },
    "instructions": {
      "type": "array",
      "description": "Decisions and answers on this session's requests, each delivered exactly once",
      "items": {
        "type": "object",
        "properties": {
          "instructionId": {"type": "string"},
          "approvalId": {"type": "string"},
          "status": {"enum": ["approved", "denied", "expired"]},
          "note": {"type": "string"},
          "answer": {"type": "string"},
          "createdAt": {"type": "string", "format": "date-time"},
          "message": {"type": "string"}
        },
        "required": ["instructionId", "approvalId", "status", "createdAt", "message"]
      }
    },
    "next": {"type": "string"}
  },
  "required": ["session", "instructions", "next"]
}`
	sessionCloseOutSchema = `{
  "type": "object",
  "properties": {
    "sessionId": {"type": "string"},
    "status": {"const": "closed"},
    "cancelledCount": {"type": "integer", "description": "Pending requests that closing cancelled"},
    "next": {"type": "string"}
  },
  "required": ["sessionId", "status", "cancelledCount", "next"]
}`
	itemProperties = `
    "itemId": {"type": "string"},
    "title": {"type": "string"},
    "columnKey": {"type": "string"},
    "columnName": {"type": "string"},
    "version": {"type": "integer", "description": "Grows by one with every change to the item"},
    "createdAt": {"type": "string", "format": "date-time"},
    "updatedAt": {"type": "string", "format": "date-time"}`
	itemRequired = `"itemId", "title", "columnKey", "version", "createdAt", "updatedAt"`

	boardOutSchema = `{
  "type": "object",
  "properties": {
    "columns": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "key": {"type": "string"},
          "name": {"type": "string"},
          "position": {"type": "integer"},
          "items": {
            "type": "array",
            "items": {"type": "object", "properties": {` + itemProperties + `}, "required": [` + itemRequired + `]}
          }
        },
        "required": ["key", "name", "position", "items"]
      }
    },
    "next": {"type": "string"}
  },
  "required": ["columns", "next"]
}`
	itemOutSchema = `{
  "type": "object",
  "properties": {` + itemProperties + `,
    "next": {"type": "string"}
  },
  "required": [` + itemRequired + `, "next"]
}`
)

// schema parses a schema written in this package. It panics on a mistake,
// which every test run would show at once.
func schema(text []byte) *jsonschema.Schema {
	var s jsonschema.Schema
	if err := json.Unmarshal(text, &s); err != nil {
		panic(fmt.Sprintf("mcpserver: bad schema: %v\n%s", err, text))
	}
	return &s
}

// resolve prepares a schema for validation, or panics.
func resolve(s *jsonschema.Schema) *jsonschema.Resolved {
	r, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: unresolvable schema: %v", err))
	}
	return r
}
