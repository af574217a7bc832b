package rest

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// listInstances serves GET /v1/instances: the instances the caller may see
// (every live one for reviewers and admins, their own for agents), newest
// first, each with its pending count: what `airlock instances list` shows.
func (h *handler) listInstances(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	list, err := h.svc.Instances(r.Context(), c)
	answerList(h, w, r, err, "items", list, writeInstance)
}
