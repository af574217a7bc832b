package rest

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// GET /v1/instances lists the instances the caller may see (every live one
// for reviewers and admins, their own for agents), newest first, each with
// its pending count: what `airlock instances list` shows. The route joins
// the table of rest.go when the package starts, so the OpenAPI route test
// and the T14 matrix cover it like every other.
func init() {
	routes = append(routes, route{"GET /v1/instances", true, (*handler).listInstances})
}

func (h *handler) listInstances(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	list, err := h.svc.Instances(r.Context(), c)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyList(w, "items", list, writeInstance)
}
