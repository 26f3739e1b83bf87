"""The drawing code of the notebook's experiment figures, kept here so the notebook shows what each experiment
measures and then the figure. Nothing in this file measures anything: every function draws numbers its notebook cell
has already computed. It needs only numpy and matplotlib."""
import matplotlib.pyplot as plt
import numpy as np


def plot_band(ax, x, runs, color, label, **style):
    """The median over seeds as a line, the range from smallest to largest seed as a shaded band."""
    runs = np.asarray(runs)
    ax.fill_between(x, runs.min(axis=0), runs.max(axis=0), color=color, alpha=0.2, linewidth=0)
    ax.plot(x, np.median(runs, axis=0), color=color, label=label, **({"marker": "."} | style))


def moving_average(values, width=10):
    """Entry i: the mean of values[i - width + 1 .. i] (fewer at the start)."""
    return [float(np.mean(values[max(0, i - width + 1):i + 1])) for i in range(len(values))]


def shared_legend(figure, colors, names):
    """One legend for the whole figure, above its panels, where it covers no curve or band."""
    handles = [plt.Line2D([], [], color=colors[name], marker=".", label=name) for name in names]
    figure.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=9, frameon=False)


def depth_figure(profiles, colors, block_factors, compared):
    """Top: each block's gradient over the last block's, one panel per gain. Bottom: the factor per block of the
    arrangements `compared`, at gain 1.0. `profiles[gain][arrangement]` holds one gradient profile per seed."""
    gains = list(profiles)
    depth = len(next(iter(profiles[gains[0]].values()))[0])
    figure, axes = plt.subplot_mosaic([gains, ["factors"] * len(gains)], figsize=(11, 8.2))
    for gain in gains:
        ax = axes[gain]
        for name, runs in profiles[gain].items():
            plot_band(ax, range(1, depth + 1), [[value / profile[-1] for value in profile] for profile in runs],
                      colors[name], name)
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"gradient at each block's input, gain {gain}")
        ax.set_xlabel("block (1 = nearest the input)")
        ax.set_ylabel(f"gradient / gradient at block {depth} (log scale)")
    for name in compared:
        plot_band(axes["factors"], range(1, depth), [block_factors(profile) for profile in profiles[1.0][name]],
                  colors[name], name)
    axes["factors"].axhline(1.0, color="black", linewidth=0.8)
    axes["factors"].set_title(f"factor per block, gain 1.0: {' and '.join(compared)}")
    axes["factors"].set_xlabel("block k")
    axes["factors"].set_ylabel("gradient at input / at output of block k")
    shared_legend(figure, colors, list(profiles[gains[0]]))
    figure.tight_layout(rect=(0, 0, 1, 0.95), h_pad=2.5)
    plt.show()


def prepost_figure(pre_post, last_gradients, post_over_pre, colors, depths):
    """The stream's size after each block of the deepest stacks, the last block's gradient by depth, and their
    ratio. `pre_post[arrangement][depth]` holds one (stream sizes, last-block gradient) pair per seed."""
    figure, axes = plt.subplots(1, 3, figsize=(13, 4.6))
    deepest = depths[-1]
    for name in pre_post:
        plot_band(axes[0], range(1, deepest + 1), [sizes for sizes, _ in pre_post[name][deepest]], colors[name], name)
        plot_band(axes[1], depths, last_gradients[name], colors[name], name)
    plot_band(axes[2], depths, post_over_pre, "tab:purple", "Post-LN / Pre-LN, same weights")
    axes[0].set_ylim(0, None)
    axes[0].set_title(f"size of the residual stream, {deepest} blocks")
    axes[0].set_xlabel("after block")
    axes[0].set_ylabel("per-token standard deviation")
    axes[1].set_title("gradient reaching the last block's weights")
    axes[1].set_ylabel("norm of the gradient of ff's 2nd weight matrix")
    axes[2].axhline(1.0, color="black", linewidth=0.8)
    axes[2].set_title("Post-LN's last-block gradient / Pre-LN's")
    axes[2].set_ylabel("ratio, same weights")
    for ax in axes[1:]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("blocks in the stack")
    shared_legend(figure, colors, list(pre_post))
    figure.tight_layout(rect=(0, 0, 1, 0.92), w_pad=2)
    plt.show()


def training_figure(losses, spread, settings, colors, entropy, title, seed):
    """One panel per depth: each setting's run on `seed` as a line (moving average over 10 steps), and the range of
    its moving average over the seeds of `spread` shaded (the table of training_spread.json: {"seeds": [...],
    "losses": {label: [per-step losses of each seed]}})."""
    depths = sorted({depth for _, depth, _ in settings.values()}, reverse=True)
    _, axes = plt.subplots(1, len(depths), figsize=(13, 5.4), sharey=True)
    for ax, depth in zip(axes, depths):
        for label, (_, at, _) in settings.items():
            if at != depth:
                continue
            averaged = np.array([moving_average(run) for run in spread["losses"][label]])
            steps = range(1, averaged.shape[1] + 1)
            ax.fill_between(steps, averaged.min(axis=0), averaged.max(axis=0), color=colors[label], alpha=0.2,
                            linewidth=0)
            ax.plot(range(1, len(losses[label]) + 1), moving_average(losses[label]), color=colors[label],
                    label=f"{label}: seed {seed}")
        ax.axhline(entropy, color="black", linestyle="--", linewidth=1,
                   label=f"letter frequencies alone ({entropy:.2f} nats)")
        ax.plot([], [], color="gray", alpha=0.3, linewidth=8,
                label=f"shaded: lowest to highest of {len(spread['seeds'])} seeds")
        ax.set_title(f"{depth} blocks, {title}")
        ax.set_xlabel("training step")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)  # off the bands
    axes[0].set_ylabel("loss (nats; moving average over 10 steps)")
    plt.tight_layout()
    plt.show()


def mlp_figure(gradients, colors, depth):
    """Each layer's weight-gradient norm, one line per seed, one colour per kind of network."""
    _, ax = plt.subplots(figsize=(8, 4.4))
    for kind, color in colors.items():
        for index, grads in enumerate(gradients[kind]):
            ax.plot(range(1, depth + 1), grads, marker=".", color=color, alpha=0.8, label=kind if index == 0 else None)
    ax.set_yscale("log")
    ax.set_xticks(range(1, depth + 1, 2))
    ax.set_xlabel("layer (1 = nearest the input)")
    ax.set_ylabel("weight-gradient norm (log scale)")
    ax.set_title(f"{depth} fully connected layers, {len(next(iter(gradients.values())))} seeds each")
    ax.legend(fontsize=8, loc="lower right")
    plt.tight_layout()
    plt.show()
