// Package threadquery is the question an agent asks of a thread's
// messages, shared by `nerve thread messages` and the MCP tool
// thread_messages so both answer alike: the ref defaults to the turn's
// thread ($NERVE_THREAD); inside a turn the answer comes from the
// read-only snapshot the daemon wrote ($NERVE_THREAD_SNAPSHOT), since an
// agent's sandbox may block the socket and the network; outside one the
// caller fetches it from the daemon or the thread's remote.
//
// It is a package of its own because commands are the top of the import
// graph: the MCP server cannot import cmd/nerve.
package threadquery
