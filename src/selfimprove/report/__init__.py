"""Reports over finished arms: the eval-accuracy plot (`plot`) and optional W&B logging (`wandb_log`);
the summary table as the terminal shows it (`table`); the run report page, report.html (`page` and
`sections`, fed by `collect`, `iterations`, `samples`, `overlay` and `flips`, drawn with `svg`, every value
through `markup`; the tool's records it reads
validated by `records`; `report --out` checked by `target`), imported where it is used.

Both import their heavy, optional library (matplotlib, wandb) inside the
function, so `import selfimprove` stays light and works without the extras.
"""

from .plot import plot_eval_acc
from .wandb_log import log_arms_to_wandb

__all__ = ["plot_eval_acc", "log_arms_to_wandb"]
