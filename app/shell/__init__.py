"""The main window, its menus and the workbench that ties the rooms together."""
