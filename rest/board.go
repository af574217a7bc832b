package rest

import (
	"bytes"
	"net/http"

	"github.com/airlockhq/airlock"
)

// columnInput is the body of POST /v1/board/columns (CreateColumn).
type columnInput struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

// workItemInput is the body of POST /v1/work-items (CreateWorkItem).
type workItemInput struct {
	Title     string `json:"title"`
	ColumnKey string `json:"column_key"`
}

// workItemPatchInput is the body of PATCH /v1/work-items/{id}
// (UpdateWorkItem): absent fields stay as they are.
type workItemPatchInput struct {
	Title     *string `json:"title"`
	ColumnKey *string `json:"column_key"`
	IfVersion int     `json:"if_version"`
}

func (h *handler) getBoard(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	cols, err := h.svc.Board(r.Context(), c)
	answerList(h, w, r, err, "columns", cols, writeColumn)
}

func (h *handler) createColumn(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[columnInput](h, w, r)
	if !ok {
		return
	}
	col, err := h.svc.CreateColumn(r.Context(), c, in.Key, in.Name)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusCreated, func(b *bytes.Buffer) { writeColumn(b, col) })
}

func (h *handler) createWorkItem(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[workItemInput](h, w, r)
	if !ok {
		return
	}
	item, err := h.svc.CreateWorkItem(r.Context(), c, in.Title, in.ColumnKey)
	h.answerCreated(w, r, err, "/v1/work-items/"+item.ID, func(b *bytes.Buffer) { writeWorkItem(b, item) })
}

func (h *handler) getWorkItem(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	item, err := h.svc.WorkItem(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeWorkItem(b, item) })
}

func (h *handler) updateWorkItem(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[workItemPatchInput](h, w, r)
	if !ok {
		return
	}
	item, err := h.svc.UpdateWorkItem(r.Context(), c, airlock.WorkItemPatch{
		ID: r.PathValue("id"), Title: in.Title, ColumnKey: in.ColumnKey, IfVersion: in.IfVersion,
	})
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeWorkItem(b, item) })
}

func (h *handler) listSessions(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	list, err := h.svc.Sessions(r.Context(), c)
	answerList(h, w, r, err, "items", list, func(b *bytes.Buffer, s airlock.Instance) {
		writeSession(b, s, h.svc.SessionStatus(s))
	})
}

// writeColumn writes a Column resource with its items.
func writeColumn(b *bytes.Buffer, col airlock.Column) {
	o := beginObject(b)
	o.always("key", col.Key)
	o.always("name", col.Name)
	o.always("position", col.Position)
	o.key("items")
	writeArray(b, col.Items, writeWorkItem)
	o.end()
}

// writeWorkItem writes a WorkItem resource.
func writeWorkItem(b *bytes.Buffer, item airlock.WorkItem) {
	o := beginObject(b)
	o.always("id", item.ID)
	o.always("title", item.Title)
	o.always("column_key", item.ColumnKey)
	o.always("version", item.Version)
	o.time("created_at", item.CreatedAt)
	o.time("updated_at", item.UpdatedAt)
	o.end()
}

// writeSession writes a Session resource with its status now.
func writeSession(b *bytes.Buffer, s airlock.Instance, status airlock.SessionStatus) {
	o := beginObject(b)
	o.always("id", s.ID)
	o.always("owner_id", s.OwnerID)
	o.always("name", s.Name)
	o.raw("metadata", s.Metadata)
	o.always("status", string(status))
	o.always("pending_count", s.PendingCount)
	o.time("created_at", s.CreatedAt)
	o.timePtr("last_seen_at", s.LastSeenAt)
	o.timePtr("closed_at", s.ClosedAt)
	o.end()
}
