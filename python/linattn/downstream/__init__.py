"""linattn.downstream: what a feature map does to a trained model (issue 35; docs/downstream.md).

    python3 -m linattn.downstream --out-dir DIR [--quick] [--tasks capacity,mqar,charlm,swap] [--seeds K]
                                  [--attentions LIST] [--threads T]

Writes DIR/*.csv, the PNG plots (gnuplot) and DIR/report.md. Modules: attentions (the
attentions compared), capacity (Schlag et al.'s capacity task), mqar (Zoology's
multi-query associative recall), text (GCIDE stripped of its markup, its vocabulary and split),
gpt (the small GPT), charlm (the character language model), swap (the softmax model with each
map put in, then fine-tuned), inmodel (the operator measured inside the trained models),
anchors (the published numbers), progress (the progress line), report (CSV, plots, markdown),
array and merge (the study as a Slurm job array, one configuration per task, and its merge
step).
"""
