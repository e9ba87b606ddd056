package runtime

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/troupe-go/troupe/replication"
)

// retainFor is the default retention of kept answers.
const retainFor = replication.DefaultKeptRetention

// pruneModel is pruneRetained's rule written plainly, without its fast
// path: drop what is out of retainFor, put pending requests first, drop
// the oldest answers once beyond the count budget and its slack, keep
// the newest answer's body only if it fits the byte budget with the
// pending requests, then drop the oldest answers once beyond the byte
// budget and its slack, down to the budget.
func pruneModel(rs []retained, now time.Time) []retained {
	t := now.UnixNano()
	var pending, answers []retained
	for _, r := range rs {
		if r.at < t-int64(retainFor) || r.at > t+int64(retainFor) {
			continue
		}
		if r.pending() {
			pending = append(pending, r)
		} else {
			answers = append(answers, r)
		}
	}
	if len(answers)+len(pending) > maxRetainedHeld {
		answers = answers[min(len(answers)+len(pending)-maxRetained, len(answers)):]
	}
	waiting := 0
	for _, r := range pending {
		waiting += r.size()
	}
	if len(answers) > 0 && waiting+answers[len(answers)-1].size() > maxRetainedBytes {
		last := &answers[len(answers)-1]
		last.kind, last.body, last.name, last.text = retainedTooLarge, nil, "", ""
	}
	total := waiting
	for _, r := range answers {
		total += r.size()
	}
	if total > maxRetainedBytes+maxRetainedGrowth {
		for len(answers) > 1 && total > maxRetainedBytes {
			total -= answers[0].size()
			answers = answers[1:]
		}
	}
	return slices.Concat(pending, answers)
}

func TestPruningKeepsWhatItsRuleKeeps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Unix(1700000000, 0)
		n := rapid.IntRange(0, maxRetainedHeld+8).Draw(t, "n")
		rs := make([]retained, n)
		for i := range rs {
			age := rapid.SampledFrom([]time.Duration{0, time.Second, retainFor / 2, retainFor + time.Second, -retainFor - time.Second}).Draw(t, "age")
			rs[i] = retained{
				key:  "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
				at:   now.Add(-age).UnixNano(),
				kind: rapid.SampledFrom([]byte{retainedReply, retainedPending, retainedNoReply}).Draw(t, "kind"),
				body: make([]byte, rapid.SampledFrom([]int{0, 100, 4 << 10, 66 << 10, 80 << 10}).Draw(t, "body")),
			}
			if rs[i].pending() {
				rs[i].body, rs[i].attempt = nil, 1
			}
		}
		want := pruneModel(slices.Clone(rs), now)
		got := pruneRetained(rs, now, retainFor)
		if !slices.EqualFunc(got, want, func(a, b retained) bool {
			return a.key == b.key && a.kind == b.kind && len(a.body) == len(b.body) && a.at == b.at
		}) {
			t.Fatalf("pruned to %d answers, the rule keeps %d", len(got), len(want))
		}
	})
}

// A prune the ledger asks for drops the answers before its cutoff, never
// a request pending (strict durability) nor a deferred reply still open:
// neither has an answer yet.
func TestAPruneBeforeACutoffKeepsPendingRequestsAndOpenReplies(t *testing.T) {
	now := time.Now()
	old := now.Add(-time.Hour).UnixNano()
	rs := []retained{
		{key: "pending", at: old, kind: retainedPending, attempt: 1},
		{key: "open", at: old, kind: retainedDeferred, open: &deferredKept{}},
		{key: "answered", at: old, kind: retainedReply},
		{key: "newer", at: now.UnixNano(), kind: retainedReply},
	}
	got := dropKeptBefore(rs, now.UnixNano())
	var keys []string
	for _, r := range got {
		keys = append(keys, r.key)
	}
	if want := []string{"pending", "open", "newer"}; !slices.Equal(keys, want) {
		t.Fatalf("a prune before now kept %v, want %v", keys, want)
	}
}
