package usage

import "net/url"

// Query is a usage question as the daemon's and Khala's GET /v1/usage
// take it: by a dimension, since a day, of a workflow or of one thread.
type Query struct {
	By       string // a Dimensions value; "" is workflow
	Since    string // 2006-01-02, UTC; "" all
	Workflow string
	// Thread, when set, asks about one thread's messages.
	Thread string
}

// Values is q as URL query parameters.
func (q Query) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"by": q.By, "since": q.Since, "workflow": q.Workflow, "thread": q.Thread} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// ParseQuery reads and checks a query's parameters.
func ParseQuery(v url.Values) (Query, error) {
	q := Query{By: v.Get("by"), Since: v.Get("since"), Workflow: v.Get("workflow"), Thread: v.Get("thread")}
	if q.By == "" {
		q.By = "workflow"
	}
	if err := CheckDimension(q.By); err != nil {
		return q, err
	}
	if _, err := ParseSince(q.Since); err != nil {
		return q, err
	}
	return q, nil
}

// Filter is the rows q selects.
func (q Query) Filter() Filter { return Filter{Since: q.Since, Workflow: q.Workflow} }
