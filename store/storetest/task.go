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
		{"a task is deleted by a bounded sweep once its lifetime is over, never before", s.taskSweep},
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

func (s *suite) taskSweep(t *testing.T) {
	b := s.setup(t)
	const keep = time.Hour
	t0 := b.clock.Now()
	decided, pending, expired := b.create(t), b.create(t), b.create(t) // 10-minute deadlines
	if _, err := b.approve(decided.ID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Minute)
	later := b.create(t)
	made := func(r airlock.Request) string {
		k, err := b.store.CreateTask(b.ctx, task(r, store.TaskApprovalStatus, ""))
		wantOK(t, err)
		return k.ID
	}
	onDecided := []string{made(decided), made(decided)}
	onPending, onExpired, onLater := made(pending), made(expired), made(later)
	sweep := func(limit, want int, when string) {
		t.Helper()
		n, err := b.store.SweepTasks(b.ctx, keep, limit)
		wantOK(t, err)
		if n != want {
			t.Fatalf("%s: SweepTasks(%d) = %d, want %d", when, limit, n, want)
		}
	}
	live := func(want map[string]bool) {
		t.Helper()
		for id, ok := range want {
			_, err := b.store.GetTask(b.ctx, id)
			if ok {
				wantOK(t, err)
			} else {
				wantErr(t, err, airlock.CodeNotFound, "")
			}
		}
	}
	// A task lives keep after its request's deadline or its decision,
	// whichever is later (provider.TaskExpiresAt): the approved request's,
	// the expired one's and the one still pending past its deadline (no
	// sweep came) end keep after their deadline; the later request's, keep
	// after its own.
	b.clock.Set(t0.Add(15 * time.Minute))
	got, err := b.store.ExpireRequests(b.ctx, []string{expired.ID})
	wantOK(t, err)
	if len(got) != 1 {
		t.Fatalf("ExpireRequests = %d requests, want 1", len(got))
	}
	b.clock.Set(decided.DeadlineAt.Add(keep - time.Microsecond))
	sweep(10, 0, "a microsecond before the first deadline's tasks end")
	b.clock.Set(decided.DeadlineAt.Add(keep))
	sweep(1, 1, "when they end, a sweep of one")
	sweep(10, 3, "the next sweep")
	sweep(10, 0, "one more")
	live(map[string]bool{onDecided[0]: false, onDecided[1]: false, onPending: false, onExpired: false, onLater: true})
	b.clock.Set(later.DeadlineAt.Add(keep - time.Microsecond))
	sweep(10, 0, "a microsecond before the later request's task ends")
	b.clock.Set(later.DeadlineAt.Add(keep))
	sweep(10, 1, "when it ends")
	live(map[string]bool{onLater: false})
	// The requests stay: a sweep deletes only tasks.
	for _, r := range []airlock.Request{decided, pending, expired, later} {
		b.get(t, r.ID)
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
