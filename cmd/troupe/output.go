package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/troupe-go/troupe/internal/adminapi"
)

// pageSize is the page the CLI asks members for: the API's largest.
const pageSize = 1000

// fetch gets path into v, or writes the body as it came when raw.
func fetch(ctx context.Context, c *client, path string, q url.Values, raw bool, out io.Writer, v any) (bool, error) {
	body, err := c.get(ctx, path, q)
	if err != nil {
		return false, err
	}
	if raw {
		_, err := out.Write(body)
		return false, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("%s: the answer is not the API's JSON: %w", path, err)
	}
	return true, nil
}

// tabled is a table being written: aligned columns, lines without
// trailing blanks (an empty last cell would leave some).
type tabled struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func table(out io.Writer) *tabled {
	t := &tabled{out: out}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *tabled) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the table.
func (t *tabled) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(t.buf.String()) {
		if _, err := io.WriteString(t.out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func status(ctx context.Context, c *client, raw bool, out io.Writer) error {
	var st adminapi.StatusResponse
	if ok, err := fetch(ctx, c, "/api/v1/status", nil, raw, out, &st); !ok {
		return err
	}
	w := table(out)
	m := st.Member
	if m.Address != "" {
		fmt.Fprintf(w, "ADDRESS\t%s\n", m.Address)
		fmt.Fprintf(w, "NODE\t%s\n", m.NodeID)
	}
	fmt.Fprintf(w, "MODE\t%s\n", st.Mode)
	ready := "no"
	if st.Readiness.Ready {
		ready = "yes"
	}
	fmt.Fprintf(w, "READY\t%s\n", ready)
	var checks []string
	for _, c := range st.Readiness.Checks {
		if c.OK {
			checks = append(checks, c.Name+" ok")
		} else {
			checks = append(checks, fmt.Sprintf("%s FAILING (%s)", c.Name, c.Reason))
		}
	}
	fmt.Fprintf(w, "CHECKS\t%s\n", strings.Join(checks, ", "))
	up := time.Duration(m.UptimeSeconds * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(w, "STARTED\t%s (up %s)\n", m.StartTime, up)
	fmt.Fprintf(w, "VERSION\t%s (%s)\n", m.BuildVersion, m.GoVersion)
	if st.Mode == adminapi.ModeCluster {
		var by []string
		for _, s := range []string{"alive", "suspect", "dead", "leaving", "joining"} {
			by = append(by, fmt.Sprintf("%s %d", s, st.Cluster.MembersByStatus[s]))
		}
		fmt.Fprintf(w, "MEMBERS\t%d: %s\n", st.Cluster.Members, strings.Join(by, ", "))
	}
	placement := st.PlacementVersion
	if placement == "" {
		placement = "none yet (not joined)"
	}
	fmt.Fprintf(w, "PLACEMENT\t%s\n", placement)
	fmt.Fprintf(w, "REVISION\t%s\n", st.Revision)
	return w.Flush()
}

// members prints every page: the API bounds a page, not the list.
func members(ctx context.Context, c *client, q url.Values, raw bool, out io.Writer) error {
	q.Set("limit", strconv.Itoa(pageSize))
	var all []adminapi.Member
	var pages [][]byte
	mode := ""
	for {
		var mr adminapi.MembersResponse
		body, err := c.get(ctx, "/api/v1/members", q)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &mr); err != nil {
			return fmt.Errorf("/api/v1/members: the answer is not the API's JSON: %w", err)
		}
		pages = append(pages, body)
		all, mode = append(all, mr.Members...), mr.Mode
		if mr.Next == "" {
			break
		}
		if mr.Next == q.Get("after") {
			return fmt.Errorf("/api/v1/members: the server's next cursor does not advance")
		}
		q.Set("after", mr.Next)
	}
	if raw {
		return writeMerged(out, pages)
	}
	if mode == adminapi.ModeStandalone {
		fmt.Fprintln(out, "standalone system: no cluster members")
		return nil
	}
	w := table(out)
	fmt.Fprintln(w, "ADDRESS\tSTATUS\tINCARNATION\tTYPES\t")
	for _, m := range all {
		self := ""
		if m.Self {
			self = "(this member)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", m.Address, m.Status, m.Incarnation, strings.Join(m.ActorTypes, ","), self)
	}
	return w.Flush()
}

// writeMerged writes members' pages as one document: the first page's
// fields, every page's members, and no next. It keeps the fields this
// CLI does not know, as the API sent them.
func writeMerged(out io.Writer, pages [][]byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(pages[0], &doc); err != nil {
		return fmt.Errorf("/api/v1/members: the answer is not the API's JSON: %w", err)
	}
	var members []json.RawMessage
	for _, p := range pages {
		var page struct {
			Members []json.RawMessage `json:"members"`
		}
		if err := json.Unmarshal(p, &page); err != nil {
			return fmt.Errorf("/api/v1/members: the answer is not the API's JSON: %w", err)
		}
		members = append(members, page.Members...)
	}
	if members == nil {
		members = []json.RawMessage{}
	}
	m, err := json.Marshal(members)
	if err != nil {
		return err
	}
	doc["members"] = m
	delete(doc, "next")
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

func placement(ctx context.Context, c *client, raw bool, out io.Writer) error {
	var pr adminapi.PlacementResponse
	if ok, err := fetch(ctx, c, "/api/v1/placement", nil, raw, out, &pr); !ok {
		return err
	}
	fmt.Fprintf(out, "placement version %s\n", pr.PlacementVersion)
	if pr.Mode == adminapi.ModeStandalone {
		fmt.Fprintln(out, "standalone system: every key lives in it")
		return nil
	}
	w := table(out)
	fmt.Fprintln(w, "TYPE\tREPLICAS\tMEMBER\tSTATUS\tSHARE")
	for _, pt := range pr.Types {
		reps := "-" // a type this member does not host: its count is unknown here
		if pt.Replicas > 0 {
			reps = strconv.Itoa(pt.Replicas)
		}
		for i, m := range pt.Members {
			name, r := pt.Name, reps
			if i > 0 {
				name, r = "", ""
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%5.1f%%\n", name, r, m.Address, m.Status, 100*m.ShareRatio)
		}
	}
	return w.Flush()
}

func where(ctx context.Context, c *client, typ, key string, raw bool, out io.Writer) error {
	var wr adminapi.WhereResponse
	q := url.Values{"type": {typ}, "key": {key}}
	if ok, err := fetch(ctx, c, "/api/v1/placement/where", q, raw, out, &wr); !ok {
		return err
	}
	if wr.Mode == adminapi.ModeStandalone {
		fmt.Fprintf(out, "%s/%s lives in this standalone system\n", wr.Type, wr.Key)
		return nil
	}
	w := table(out)
	fmt.Fprintln(w, "#\tADDRESS\tSTATUS\tROLE")
	inSet := false
	for i, r := range wr.Replicas {
		role := "replica"
		if i == 0 {
			role = "primary"
		}
		if r.Address == wr.Owner {
			role, inSet = role+", owner", true
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", i+1, r.Address, r.Status, role)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case wr.Owner == "":
		fmt.Fprintln(out, "owner: none (no replica serves)")
	case !inSet:
		fmt.Fprintf(out, "owner: %s (the next live member past the replicas)\n", wr.Owner)
	}
	if wr.OwnerRefuses == adminapi.RefusesNoMajority {
		fmt.Fprintln(out, "the owner, this member, refuses the key now: it lost the majority of the cluster")
	} else if wr.OwnerRefuses != "" {
		fmt.Fprintf(out, "the owner refuses the key now: %s\n", wr.OwnerRefuses)
	}
	fmt.Fprintf(out, "placement version %s\n", wr.PlacementVersion)
	return nil
}

func types(ctx context.Context, c *client, raw bool, out io.Writer) error {
	var tr adminapi.TypesResponse
	if ok, err := fetch(ctx, c, "/api/v1/types", nil, raw, out, &tr); !ok {
		return err
	}
	w := table(out)
	fmt.Fprintln(w, "TYPE\tACTIVATIONS\tQUEUED\tREPLICAS\tPINNED\tRING MEMBERS")
	for _, t := range tr.Types {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%t\t%d\n", t.Name, t.Activations, t.QueuedMessages, t.Replicas, t.Pinned, t.RingMembers)
	}
	return w.Flush()
}

func records(ctx context.Context, c *client, raw bool, out io.Writer) error {
	var rr adminapi.RecordsResponse
	if ok, err := fetch(ctx, c, "/api/v1/records", nil, raw, out, &rr); !ok {
		return err
	}
	fmt.Fprintf(out, "%s store, snapshot at %s; unhealthy after %s without a heartbeat\n", rr.Store, rr.SnapshotAt, time.Duration(rr.UnhealthyAfterMs)*time.Millisecond)
	w := table(out)
	fmt.Fprintln(w, "ROLE\tNODE\tINCARNATION\tSEQ\tAGE\tHEALTH\tREADY\tVERSION\tSOURCE")
	for _, r := range rr.Records {
		node := r.Node
		if r.Self {
			node += " (self)"
		}
		age := (time.Duration(r.HeartbeatAgeMs) * time.Millisecond).Round(time.Millisecond)
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%t\t%s\t%s\n", r.Role, node, r.Incarnation, r.Seq, age, r.Health, r.Ready, r.BuildVersion, r.Source)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if rr.Unreadable > 0 {
		fmt.Fprintf(out, "%d records of a newer format left out\n", rr.Unreadable)
	}
	return nil
}
