"""One module per `caef-bench` command: each registers its subparser (`register`) and a short handler
that calls into the stage packages (machines, data, train, evaluate, report, serve).

Modules import only the standard library at the top, so building the parser stays quick: `solve`
answers in a second or two, and the heavy libraries load inside the handler that needs them."""

from . import (copy_records, data, eval_curve, lm_eval, onestep, report_curve, run, serve, solve, trace, train,
               train_curve)

# In the order `caef-bench --help` lists them: from the machines to the results, then the servers.
COMMANDS = (trace, data, train, train_curve, eval_curve, report_curve, onestep, solve, copy_records, run, serve,
            lm_eval)
