"""The no-op plugin of the benchmark: a magix handler that does nothing."""
from roomkit_plugin import Plugin

plugin = Plugin()


@plugin.on_magix
def on_magix(room, event):
    pass


if __name__ == "__main__":
    plugin.run()
