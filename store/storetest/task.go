package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testTasks checks MCP tasks (store.Tasks).
func (s *suite) testTasks(t *testing.T) {
	runAll(t, []test{
		{"a task is read back as it was made, at the store's now", s.taskRoundTrip},
		{"a task on another owner's request, or on none, is not_found", s.taskOtherOwner},
		{"an unknown task is not_found", s.taskUnknown},
		{"an invalid task is refused before it is stored", s.taskInvalid},
	})
}

// task is a task of kind on request r, owned by r's owner.
func task(r airlock.Request, kind string, call string) store.Task {
	return store.Task{ID: airlock.NewID("tsk_"), RequestID: r.ID, Owner: r.OwnerID, Kind: kind, Call: json.RawMessage(call)}
}

func (s *suite) taskRoundTrip(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	for _, in := range []store.Task{
		task(r, store.TaskApprovalPrompt, `{"tool_name":"Bash","input":{"z":1,"a":[2,1]}}`),
		task(r, store.TaskApprovalStatus, ""),
	} {
		made, err := b.store.CreateTask(b.ctx, in)
		wantOK(t, err)
		now := b.clock.Now().Truncate(time.Microsecond)
		if !made.CreatedAt.Equal(now) {
			t.Fatalf("CreateTask made it at %s, want the store's now %s", made.CreatedAt, now)
		}
		got, err := b.store.GetTask(b.ctx, in.ID)
		wantOK(t, err)
		if got.ID != in.ID || got.RequestID != r.ID || got.Owner != r.OwnerID || got.Kind != in.Kind ||
			string(got.Call) != string(in.Call) || !got.CreatedAt.Equal(now) {
			t.Fatalf("GetTask = %+v (call %s); want %+v (call %s) at %s", got, got.Call, in, in.Call, now)
		}
		b.clock.Advance(time.Second)
	}
}

func (s *suite) taskOtherOwner(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	other := task(r, store.TaskApprovalStatus, "")
	other.Owner = ownerB
	_, err := b.store.CreateTask(b.ctx, other)
	wantErr(t, err, airlock.CodeNotFound, "")
	none := task(r, store.TaskApprovalStatus, "")
	none.RequestID = "apr_nosuchrequest"
	_, err = b.store.CreateTask(b.ctx, none)
	wantErr(t, err, airlock.CodeNotFound, "")
	for _, id := range []string{other.ID, none.ID} {
		_, err := b.store.GetTask(b.ctx, id)
		wantErr(t, err, airlock.CodeNotFound, "")
	}
}

func (s *suite) taskUnknown(t *testing.T) {
	b := s.setup(t)
	_, err := b.store.GetTask(b.ctx, "tsk_nosuchtask0000000")
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) taskInvalid(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	for _, bad := range []func(*store.Task){
		func(k *store.Task) { k.ID = "apr_notatask00000000" },
		func(k *store.Task) { k.Kind = "tools/call" },
		func(k *store.Task) { k.Owner = "" },
		func(k *store.Task) { k.Call = json.RawMessage(`{"a":`) },
		func(k *store.Task) { k.Call = make(json.RawMessage, store.MaxTaskCall+1) },
	} {
		k := task(r, store.TaskApprovalStatus, "")
		bad(&k)
		_, err := b.store.CreateTask(b.ctx, k)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
		if _, err := b.store.GetTask(b.ctx, k.ID); err == nil {
			t.Fatalf("an invalid task %+v was stored", k)
		}
	}
}

// tasksAcrossReplicas: a task made through one store is read through the
// other, and its request, decided through the other, is read there with
// its one outcome.
func (s *replicaSuite) tasksAcrossReplicas(t *testing.T) {
	r := s.setup(t)
	reqs := r.seed(t, 2)
	var tasks []store.Task
	for _, req := range reqs {
		k, err := r.on(0).CreateTask(r.ctx, task(req, store.TaskApprovalStatus, ""))
		wantOK(t, err)
		tasks = append(tasks, k)
	}
	if _, err := approveOn(r, r.on(1), reqs[0].ID); err != nil {
		t.Fatal(err)
	}
	for i, k := range tasks {
		got, err := r.on(1).GetTask(r.ctx, k.ID)
		wantOK(t, err)
		if got.RequestID != reqs[i].ID || !got.CreatedAt.Equal(k.CreatedAt) {
			t.Fatalf("through the other store: %+v, want %+v", got, k)
		}
		req, err := r.on(1).GetRequest(r.ctx, got.RequestID)
		wantOK(t, err)
		want := map[int]airlock.State{0: airlock.StateApproved, 1: airlock.StatePending}[i]
		if req.State != want {
			t.Fatalf("task %s's request is %s through the other store, want %s", k.ID, req.State, want)
		}
	}
}
