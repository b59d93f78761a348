import unittest

from roomkit_plugin.config import Config, resolve, room_matches


class ResolveTests(unittest.TestCase):
    def test_base_for_no_room(self):
        self.assertEqual(resolve({"a": 1}, {"*": {"a": 2}}, None), {"a": 1})

    def test_more_literal_glob_wins_whatever_the_order(self):
        layers = {"vip-*": {"greeting": "welcome back"}, "*": {"greeting": "hi", "emoji": False}}
        self.assertEqual(resolve({"greeting": "hello", "emoji": True, "n": 1}, layers, "vip-1"),
                         {"greeting": "welcome back", "emoji": False, "n": 1})
        self.assertEqual(resolve({"greeting": "hello"}, layers, "lobby"), {"greeting": "hi", "emoji": False})

    def test_equal_literals_apply_in_text_order(self):
        # "a?" and "?b" both have one literal: "?b" < "a?" by text, so "a?" applies last.
        self.assertEqual(resolve({}, {"a?": {"k": "a?"}, "?b": {"k": "?b"}}, "ab"), {"k": "a?"})

    def test_top_level_values_are_replaced_whole(self):
        self.assertEqual(resolve({"o": {"x": 1, "y": 2}}, {"*": {"o": {"x": 3}}}, "r"), {"o": {"x": 3}})

    def test_no_matching_glob_is_the_base_itself(self):
        base = {"a": 1}
        self.assertIs(resolve(base, {"vip-*": {"a": 2}}, "lobby"), base)

    def test_globs_are_fnmatch(self):
        self.assertTrue(room_matches("*", "anything"))
        self.assertTrue(room_matches("room-?", "room-1"))
        self.assertFalse(room_matches("room-?", "room-10"))
        self.assertTrue(room_matches("room-[0-9]", "room-7"))
        self.assertFalse(room_matches("Lobby", "lobby"))


class ConfigTests(unittest.TestCase):
    def test_mapping_reads_the_base(self):
        config = Config({"greeting": "hello"}, {"vip-*": {"greeting": "welcome back"}})
        self.assertEqual(config["greeting"], "hello")
        self.assertEqual(dict(config), {"greeting": "hello"})
        self.assertEqual(config.get("missing", 5), 5)
        self.assertEqual(config.for_room("vip-1")["greeting"], "welcome back")
        self.assertEqual(config("vip-1"), config.for_room("vip-1"))

    def test_pushed_room_config_wins_until_the_base_changes(self):
        config = Config({"g": "a"})
        config._set_room("lobby", {"g": "pushed"})
        self.assertEqual(config.for_room("lobby"), {"g": "pushed"})
        config._set_room(None, {"g": "new base"})
        self.assertEqual(config.for_room("lobby"), {"g": "new base"})

    def test_without_layers_each_room_is_fetched_once_until_the_base_changes(self):
        asked = []
        config = Config({"g": "a"}, fetch=lambda room: asked.append(room) or {"g": "for " + room})
        self.assertEqual(config.for_room("lobby"), {"g": "for lobby"})
        self.assertEqual(config.for_room("lobby"), {"g": "for lobby"})
        self.assertIsNone(config.room_config)
        config._set_room(None, {"g": "b"})
        self.assertEqual(config.for_room("lobby"), {"g": "for lobby"})
        self.assertEqual(asked, ["lobby", "lobby"])

    def test_non_object_base_is_an_empty_mapping(self):
        config = Config("text")
        self.assertEqual(len(config), 0)
        self.assertEqual(config.base, "text")


if __name__ == "__main__":
    unittest.main()
