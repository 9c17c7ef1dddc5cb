"""The report pages' stylesheet and table filter, apart from the page assembly so that pages
without charts (``kernelsearch audit -o``) share the look without needing plotly."""

CSS = """
:root { --fg:#1d2430; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --accent:#3559e0; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
       color:var(--fg); background:var(--bg); }
header { background:#1d2430; color:#fff; padding:18px 32px; }
header h1 { margin:0 0 4px; font-size:22px; } header p { margin:0; color:#c7cdd8; }
nav { padding:8px 32px; background:#fff; border-bottom:1px solid var(--line); position:sticky;
      top:0; z-index:10; } nav a { margin-right:14px; color:var(--accent); text-decoration:none; }
main { padding:16px 32px 48px; max-width:1500px; }
section { margin:0 0 28px; } h2 { font-size:18px; margin:24px 0 8px; }
figure.ks-figure { margin:0 0 18px; background:#fff; border:1px solid var(--line);
                   border-radius:8px; padding:12px 16px; }
figure.ks-figure h3 { margin:0; font-size:15px; } p.note { margin:2px 0 6px; color:var(--muted); }
div.ks-chart { width:100%; min-height:300px; }
table { border-collapse:collapse; width:100%; background:#fff; font-size:13px; }
th, td { border:1px solid var(--line); padding:4px 6px; text-align:left; vertical-align:top; }
th { background:#eef1f6; }
table.candidates td:nth-child(5) { max-width:360px; }
table.candidates td:nth-child(7) { max-width:320px; }
table.audit td:nth-child(8) { max-width:240px; } table.audit td:nth-child(9) { max-width:420px; }
table.audit td { overflow-wrap:anywhere; }
td small { color:var(--muted); } code { font-size:12px; }
pre { max-width:760px; max-height:480px; overflow:auto; background:#0f1522; color:#e6e9ef;
      padding:8px; border-radius:6px; font-size:12px; }
details summary { cursor:pointer; color:var(--accent); white-space:nowrap; }
pre.measured { background:#eef1f6; color:#1d2430; white-space:pre-wrap; }
.fam { display:inline-block; font-size:11px; padding:0 6px; border-radius:8px; background:#eef1f6;
       color:#344054; } .star { color:#d4a106; }
.st { font-weight:600; } .st-correct { color:#12823b; } .st-incorrect { color:#c4320a; }
.st-compile_error, .st-runtime_error, .st-timeout, .st-crashed { color:#b54708; }
.st-rejected { color:#9e2a9e; } .st-pending { color:var(--muted); }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:0 0 12px; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
ol.lineage { background:#fff; border:1px solid var(--line); border-radius:8px;
             padding:10px 10px 10px 36px; }
ol.lineage li { margin:4px 0; } .idea { color:#344054; margin-left:4px; }
input.ks-filter { margin:6px 0; padding:4px 8px; width:320px; border:1px solid var(--line);
                  border-radius:6px; }
p.empty { color:var(--muted); }
"""

# rows of the table an ``input.ks-filter`` names (``data-table``) shown only where their
# ``data-search`` text holds what is typed
FILTER_SCRIPT = """
document.querySelectorAll("input.ks-filter").forEach(function (box) {
  var rows = document.querySelectorAll("#" + box.dataset.table + " tbody tr");
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase().trim();
    rows.forEach(function (tr) { tr.hidden = q !== "" && tr.dataset.search.indexOf(q) < 0; });
  });
});
"""
