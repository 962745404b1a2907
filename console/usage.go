package console

import (
	"net/http"

	"github.com/nerve-agents/nerve/internal/usage"
)

// usageDims are the dimensions the usage page shows, a table each.
var usageDims = []string{"workflow", "agent", "model", "day"}

// usageData is the usage page's: one report per dimension, each of the
// same rollup, so every table's total is the same.
type usageData struct {
	Total  usage.Totals
	Tables []*usage.Report
}

func (c *Console) usagePage(r *http.Request, _ user) (view, error) {
	d := usageData{}
	for _, by := range usageDims {
		rep, err := c.src.Usage(r.Context(), usage.Query{By: by})
		if err != nil {
			return view{name: "usage", title: "Usage", nav: "usage"}, err
		}
		d.Tables = append(d.Tables, rep)
		d.Total = rep.Total
	}
	return view{name: "usage", title: "Usage", nav: "usage", data: d}, nil
}
