"""The workbench's figures, in one place: the per-layer cycle breakdown (`codesign run --plot`,
the notebooks, the sweep report), the module-activity timeline (`codesign sim run --timeline`),
the device comparison (`codesign compare`); the sweep report's own figures are drawn in
`codesign.report.figures` with this package's style. Every function returns a matplotlib Figure
(Agg backend: no display needed); `save`/`save_as` write it and close it."""

from codesign.plots.layers import LayerCycles, from_steps, layers_figure
from codesign.plots.style import LogTicks, log_axes, number, save, save_as, short, tick_names
from codesign.plots.timeline import busy_mask, overlap_fraction, timeline_figure

__all__ = ["LayerCycles", "LogTicks", "busy_mask", "from_steps", "layers_figure", "log_axes", "number",
           "overlap_fraction", "save", "save_as", "short", "tick_names", "timeline_figure"]
