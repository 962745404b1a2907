package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Child threads. A moderator's child turn is committed with its child's
// id (TurnChild); once that commit is on disk the child thread is
// created, and when the child ends its outcome closes the turn. Each of
// these is its own commit, so each is done again when missed: the
// sweeper checks every child turn at least every ChildCheck (the turn's
// LeaseExpires), creating a child that is missing and delivering one
// that ended. Creating a child that exists and delivering one twice are
// both no-ops.

// ChildCheck is how often the sweeper checks on a child turn's thread.
const ChildCheck = time.Minute

// followUp does what a committed change c calls for beyond its thread:
// start the child threads it assigned, and when it ended the thread,
// tell the parent and cancel the children still running.
func (e *Engine) followUp(c *khaladb.ThreadChange) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FollowUpTimeout)
	defer cancel()
	for _, t := range c.Turns {
		if t.State == khaladb.TurnChild && t.Rev == 0 { // new in c
			e.startChild(ctx, c.Thread, t)
		}
	}
	if !slices.ContainsFunc(c.Events, func(e workflow.Event) bool { return e.Type == workflow.EventThreadEnded }) {
		return
	}
	if c.Thread.Parent != nil {
		e.DeliverChild(ctx, c.Thread)
	}
	var never []string // children not created: the parent ended first
	for _, l := range c.Thread.Children {
		if l.Status == workflow.StatusRunning &&
			!e.cancelThread(ctx, l.Thread, "parent "+c.Thread.Workflow+"#"+c.Thread.ID+" ended ("+c.Thread.Status+")") {
			never = append(never, l.Thread)
		}
	}
	if len(never) > 0 {
		e.markCancelled(ctx, c.Thread.ID, never)
	}
}

// markCancelled records in thread's links that children were cancelled
// before they were created.
func (e *Engine) markCancelled(ctx context.Context, thread string, children []string) {
	err := e.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		c.Thread.Children = slices.Clone(v.Thread.Children)
		for i, l := range c.Thread.Children {
			if l.Status == workflow.StatusRunning && slices.Contains(children, l.Thread) {
				c.Thread.Children[i].Status = workflow.StatusCancelled
			}
		}
		return c, nil
	})
	if err != nil {
		e.log.Error("record children cancelled before they started", "thread", thread, "err", err)
	}
}

// startChild creates the child thread of parent's child turn t. A child
// that cannot start at all (an unknown workflow, bad input) fails the
// parent, as it does locally: the moderator asked for what cannot be.
func (e *Engine) startChild(ctx context.Context, parent khaladb.Thread, t khaladb.Turn) {
	i := slices.IndexFunc(parent.Pending, func(p workflow.Turn) bool { return p.Step == t.Step })
	if i < 0 {
		return
	}
	wt := parent.Pending[i]
	if !e.childTurnOpen(ctx, t.ID) {
		return // the parent ended (a sibling could not start, say)
	}
	fail := func(reason string) {
		e.spawnFailed(ctx, parent.ID, t, reason)
	}
	rec, err := e.store.Workflow(ctx, wt.Workflow)
	if errors.Is(err, khaladb.ErrNotFound) {
		fail(fmt.Sprintf("child workflow %q is not published on this Khala", wt.Workflow))
		return
	}
	var def *workflow.Definition
	if err == nil {
		def, err = e.defs.get(ctx, rec.SourceHash)
	}
	if err != nil {
		e.log.Error("start a child thread", "parent", parent.ID, "child", t.Child, "err", err)
		return // the sweeper tries again
	}
	input, err := def.CheckInputs(wt.Input)
	switch {
	case err != nil:
		fail(fmt.Sprintf("child workflow %s: %v", wt.Workflow, err))
		return
	case def.Workspace != nil:
		fail(fmt.Sprintf("child workflow %s declares a workspace; a moderator cannot start one (start it with nerve workflow run --base)", wt.Workflow))
		return
	}
	p := &workflow.Parent{Ref: parentRef(parent), Thread: parent.ID, Step: t.Step}
	var c *khaladb.ThreadChange
	err = e.routed(ctx, func(ids *reservedIDs) error {
		var err error
		c, err = startThread(ctx, def, rec.SourceHash, t.Child, input, nil, "", parent.Initiator, p, parent.Depth+1, e.routing(ids), e.now())
		if err == nil {
			withPriority(c, parent.Priority) // a child runs as urgently as its parent
		}
		if err == nil {
			err = e.store.CreateThread(ctx, c)
		}
		return err
	})
	switch {
	case err != nil && strings.Contains(err.Error(), "already exists"):
	case err != nil:
		e.log.Error("start a child thread", "parent", parent.ID, "child", t.Child, "err", err)
	default:
		e.obs.ThreadStarted()
		e.handoffs.sawBare(c.Thread.ID)
		e.changed(c)
		// A parent that ended while the child was made cancelled what it
		// knew of: this child too.
		if tk, err := e.store.Turn(ctx, t.ID); err == nil && tk.State == khaladb.TurnCancelled {
			e.cancelThread(ctx, c.Thread.ID, "parent "+parentRef(parent)+" ended")
		}
	}
}

// childTurnOpen reports whether child turn id still waits for its child.
func (e *Engine) childTurnOpen(ctx context.Context, id string) bool {
	tk, err := e.store.Turn(ctx, id)
	return err != nil || tk.State == khaladb.TurnChild // unsure: go on; creating twice is a no-op
}

func parentRef(t khaladb.Thread) string { return t.Workflow + "#" + t.ID }

// spawnFailed records why child turn t of thread could not start (a
// message with an error of kind spawn) and fails the thread with it.
func (e *Engine) spawnFailed(ctx context.Context, thread string, t khaladb.Turn, reason string) {
	var c *khaladb.ThreadChange
	err := e.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c = nil
		tk := v.Turn(t.ID)
		if tk == nil || tk.State != khaladb.TurnChild || tk.Child != t.Child {
			return nil, nil
		}
		now := e.now()
		c = &khaladb.ThreadChange{Thread: v.Thread}
		m := workflow.Message{Step: tk.Step, Role: tk.Role, Instruction: tk.Instruction, At: now,
			Error: &workflow.MessageError{Kind: workflow.ErrorKindSpawn, Message: reason}}
		done := *tk
		done.State = khaladb.TurnAnswered
		c.Turns, c.Messages = []khaladb.Turn{done}, []workflow.Message{m}
		c.Events = []workflow.Event{{At: now, Type: workflow.EventTurnFailed, Thread: v.Thread.ID, Step: tk.Step, Role: tk.Role,
			Turn: tk.ID, Message: workflow.ErrorKindSpawn + ": " + reason}}
		c.Thread.Children = slices.Clone(v.Thread.Children)
		for i := range c.Thread.Children {
			if c.Thread.Children[i].Thread == tk.Child {
				c.Thread.Children[i].Status = workflow.StatusFailed
			}
		}
		endThread(c, workflow.StatusFailed, nil, reason, openTurns(v, tk.ID), now)
		return c, nil
	})
	if err != nil {
		e.log.Error("fail a thread whose child could not start", "thread", thread, "turn", t.ID, "err", err)
		return
	}
	if c != nil {
		e.changed(c)
	}
}

// DeliverChild tells child's parent that child ended: its link's status,
// and, when a step of the parent waits for it, the step's message.
func (e *Engine) DeliverChild(ctx context.Context, child khaladb.Thread) {
	p := child.Parent
	var c *khaladb.ThreadChange
	err := e.updateRouted(ctx, p.Thread, func(v *khaladb.ThreadView, rt routing) (*khaladb.ThreadChange, error) {
		var err error
		c, err = childEnded(ctx, e.defs, v, child, rt, e.now())
		return c, err
	})
	if err != nil {
		e.log.Error("deliver a child thread's outcome", "parent", p.Thread, "child", child.ID, "err", err)
		return
	}
	if c != nil {
		e.changed(c)
	}
}

// childEnded is the change of parent view v when child ended: nil when
// the parent already knows.
func childEnded(ctx context.Context, defs *defCache, v *khaladb.ThreadView, child khaladb.Thread, rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	th := v.Thread
	links := slices.Clone(th.Children)
	i := slices.IndexFunc(links, func(l khaladb.ChildLink) bool { return l.Thread == child.ID })
	if i >= 0 {
		links[i].Status = child.Status
	}
	t := v.Turn(khaladb.TurnID(th.ID, child.Parent.Step))
	if t == nil || t.State != khaladb.TurnChild || t.Child != child.ID || th.Ended() {
		if i < 0 || th.Children[i].Status == child.Status {
			return nil, nil
		}
		c := &khaladb.ThreadChange{Thread: th}
		c.Thread.Children, c.Thread.UpdatedAt = links, now
		// No step waits for it (an agent started it, or the parent
		// ended first): what it spent counts in the parent's totals here,
		// once, as its link ends; past the parent's budget nothing more
		// of the parent starts.
		if th.Children[i].Status == workflow.StatusRunning && child.Usage.Messages > 0 {
			c.Thread.Usage.Merge(child.Usage)
			if !th.Ended() {
				def, err := defs.get(ctx, th.SourceHash)
				if err != nil {
					return nil, err
				}
				c.Thread.Pending = slices.Clone(th.Pending)
				stopOverBudget(def, v, c, "", now)
			}
		}
		return c, nil
	}
	def, err := defs.get(ctx, th.SourceHash)
	if err != nil {
		return nil, err
	}
	ref := child.Workflow + "#" + child.ID
	m := workflow.Message{Child: ref, Content: resultText(child.Result)}
	if child.Usage.Messages > 0 {
		tot := child.Usage
		m.ChildUsage = &tot
	}
	if child.Status == workflow.StatusCompleted {
		if obj, ok := child.Result.(map[string]any); ok {
			m.Meta = obj
		}
	} else {
		reason := child.Error
		if reason == "" {
			reason = "child thread " + ref + " was " + child.Status
		}
		m.Error = &workflow.MessageError{Kind: workflow.ErrorKindChild, Message: reason}
	}
	ev := workflow.Event{At: now, Type: workflow.EventChildEnded, Thread: th.ID, Step: t.Step, Role: t.Role, Turn: t.ID,
		Status: child.Status, Message: ref}
	c, err := closeTurn(ctx, def, nil, v, t, m, ev, rt, now)
	if c != nil {
		c.Thread.Children = links
	}
	return c, err
}

// resultText is a child's result as a message's content: a string as it
// is, anything else as JSON.
func resultText(result any) string {
	switch r := result.(type) {
	case nil:
		return ""
	case string:
		return r
	}
	data, _ := json.Marshal(result)
	return string(data)
}

// cancelThread cancels a running thread (a parent's child); false: there
// is no such thread.
func (e *Engine) cancelThread(ctx context.Context, id, by string) bool {
	var c *khaladb.ThreadChange
	err := e.store.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c = nil
		if v.Thread.Ended() {
			return nil, nil
		}
		var err error
		c, err = CancelChange(v, by, e.now())
		return c, err
	})
	switch {
	case errors.Is(err, khaladb.ErrNotFound):
		return false
	case err != nil:
		e.log.Error("cancel a child thread", "thread", id, "err", err)
	case c != nil:
		e.changed(c)
	}
	return true
}

// checkChild is the sweeper's check of a child turn: create its thread
// if missing, deliver it if it ended, else look again later.
func (e *Engine) checkChild(ctx context.Context, d khaladb.DueTurn) {
	pv, err := e.store.Thread(ctx, d.Thread)
	if err != nil {
		return
	}
	t := pv.Turn(d.Turn)
	if t == nil || t.State != khaladb.TurnChild {
		return
	}
	cv, err := e.store.Thread(ctx, t.Child)
	switch {
	case errors.Is(err, khaladb.ErrNotFound):
		e.startChild(ctx, pv.Thread, *t)
	case err != nil:
		return
	case cv.Thread.Parent == nil || cv.Thread.Parent.Thread != d.Thread:
		e.log.Error("a child turn names a thread that is not its child", "turn", d.Turn, "thread", t.Child)
		return
	case cv.Thread.Ended():
		e.DeliverChild(ctx, cv.Thread)
		return
	}
	var c *khaladb.ThreadChange
	err = e.store.UpdateThread(ctx, d.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c = nil
		t := v.Turn(d.Turn)
		if t == nil || t.State != khaladb.TurnChild {
			return nil, nil
		}
		c = &khaladb.ThreadChange{Thread: v.Thread}
		nt := *t
		nt.LeaseExpires = e.now().Add(ChildCheck)
		c.Turns = []khaladb.Turn{nt}
		return c, nil
	})
	if err == nil && c != nil {
		e.sweep.poke(c.Turns[0].LeaseExpires)
	}
}
